#!/usr/bin/env bash
# Sets up everything the test suite needs on a fresh Debian machine, then runs it:
# system packages (sshd, ip/tc, iptables, Chromium for the HTML report tests), a virtual
# environment with the project and its test tools, and the lab's training stack (CPU torch,
# pinned for the lab only), and a PostgreSQL server for the history store's tests.
# Needs root: the lab cluster is built from network namespaces.
# Usage: bash tests/run.sh [pytest arguments]
set -euo pipefail
cd "$(dirname "$0")/.."

missing=()
for tool in sshd:openssh-server ssh:openssh-client ssh-keygen:openssh-client ip:iproute2 \
            tc:iproute2 iptables:iptables nsenter:util-linux chromium:chromium faketime:faketime \
            slurmctld:slurm-wlm slurmd:slurm-wlm srun:slurm-wlm munged:munge \
            /usr/lib/postgresql/15/bin/initdb:postgresql; do
  command -v "${tool%%:*}" >/dev/null 2>&1 || PATH="$PATH:/usr/sbin:/sbin" command -v "${tool%%:*}" >/dev/null 2>&1 \
    || missing+=("${tool#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  # Chromium only recommends its fonts; the report tests need text that renders.
  [[ " ${missing[*]} " == *" chromium "* ]] && missing+=(fonts-liberation)
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends $(printf '%s\n' "${missing[@]}" | sort -u) >/dev/null
fi
export PATH="$PATH:/usr/sbin:/sbin"

export PIP_DISABLE_PIP_VERSION_CHECK=1
[ -x .venv/bin/python ] || python3 -m venv .venv
.venv/bin/python -m pip install -q -r tests/requirements-lab.txt -e '.[test,node,postgres]'

.venv/bin/ruff check .
.venv/bin/ruff format --check .
.venv/bin/mypy
.venv/bin/python -m pytest "$@"
