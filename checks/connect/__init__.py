"""``connect``: every host reached, authenticated, its host key accepted and the probe run.

Hosts that could not be checked are grouped by cause, so fifty nodes behind one dead
switch read as one line; each finding of a group lists every host with its own message. Hosts
whose login shell prints on stdout around the probe (a banner, an ``echo`` in ``~/.bashrc``) are
checked all the same and named in one note.
The judge is here; ``details`` says what its findings carry, ``present`` shows them.
"""

from __future__ import annotations

from collections.abc import Sequence

from checks.connect.details import Reached, ShellOutput, Unreached
from checks.connect.explain import EXPLAINS
from checks.connect.present import PRESENTATION
from preflight.check import Check
from preflight.model import CheckResult, HostReport
from preflight.nodeset import fold
from preflight.settings import PROFILES

__all__ = ["CHECK", "PRESENTATION", "Reached", "ShellOutput", "Unreached", "judge_connect"]

_CAUSES = {
    "unreachable": "unreachable",
    "timeout": "timed out",
    "auth_refused": "authentication refused",
    "host_key_unknown": "host key not in known_hosts",
    "host_key_changed": "host key CHANGED",
    "python_missing": "Python missing",
    "probe_failed": "probe failed",
    "interrupted": "interrupted",
}


def judge_connect(hosts: Sequence[HostReport]) -> list[CheckResult]:
    failed: dict[str, list[HostReport]] = {}
    for host in hosts:
        if host.error is not None:
            failed.setdefault(host.error.kind, []).append(host)
    reached = [h for h in hosts if h.reachable]
    results: list[CheckResult] = []
    for kind, group in failed.items():
        names = [h.name for h in group]
        first = group[0].error.message if group[0].error else ""
        summary = (
            f"{fold(names)}: {first}"
            if len(group) == 1
            else f"{fold(names)}: {_CAUSES.get(kind, kind)} ({len(group)} hosts; e.g. {first})"
        )
        unreached: Unreached = {
            "cause": kind,
            "errors": {h.name: h.error.message for h in group if h.error},
        }
        results.append(CheckResult("connect", "error", summary, tuple(names), unreached))
    accepted = {h.name: keys for h in reached if (keys := h.node.connection.get("accepted_host_keys"))}
    if reached:
        note = f"; accepted new host keys of {fold(accepted)}" if accepted else ""
        details: Reached = {
            "reached": [h.name for h in reached],
            "accepted_host_keys": accepted,
            "probe_s": {h.name: h.node.connection.get("probe_s") for h in reached},
        }
        summary = f"{len(reached)} of {len(hosts)} hosts reached and probed{note}"
        results.insert(0, CheckResult(check="connect", status="pass", summary=summary, details=details))
        if (shell_note := shell_output_note(reached)) is not None:
            results.insert(1, shell_note)
    return results


# Characters of the first line a node's shell printed that the note quotes.
FIRST_LINE_CHARS = 200


def _first_line(text: str) -> str:
    line = next((line.strip() for line in text.splitlines() if line.strip()), "")
    return line if len(line) <= FIRST_LINE_CHARS else line[:FIRST_LINE_CHARS] + "..."


def shell_output_note(reached: Sequence[HostReport]) -> CheckResult | None:
    """A note naming the hosts whose login shell printed on stdout around the probe
    (``facts.connection.shell_output``), with the first line each printed; None when none did."""
    printed = {
        h.name: output
        for h in reached
        if isinstance(output := h.node.connection.get("shell_output"), dict) and output.get("text")
    }
    if not printed:
        return None
    names = list(printed)
    details: ShellOutput = {
        "item": "shell_output",
        "first_lines": {name: _first_line(str(output["text"])) for name, output in printed.items()},
        "bytes": {name: int(output.get("bytes") or 0) for name, output in printed.items()},
    }
    first = details["first_lines"][names[0]]
    summary = (
        f"{fold(names)}: the login shell prints on standard output ({first!r}"
        f"{'' if len(names) == 1 else ', on ' + names[0]}); checked all the same, but it breaks "
        "scp and rsync"
    )
    return CheckResult.note("connect", summary, tuple(names), details)


CHECK = Check(
    name="connect",
    title="every host reached over SSH (or locally), host key trusted, probe run with its Python",
    run=lambda ctx: judge_connect(ctx.hosts),
    presentation=PRESENTATION,
    always=True,
    node_local=True,
    names_unreached=True,
    profiles=PROFILES,
    explains=EXPLAINS,
)
