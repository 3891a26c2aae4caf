"""``preflight check``'s command line: its hosts and how they are reached, what it checks and with
which settings, the job's surroundings, and what it writes. Argparse lists the options in the
order they are added here, so the order of the calls below is the order of ``--help``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from preflight.cli_outputs import add_outputs
from preflight.history import command as history_command
from preflight.registry import all_checks


def names(text: str) -> list[str]:
    """A comma list of check names (``--only``, ``--skip``), blanks dropped."""
    return [name.strip() for name in text.split(",") if name.strip()]


def add_check_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    check = commands.add_parser("check", help="check the hosts (or this machine) and report")
    _add_hosts(check)
    _add_run_settings(check)
    _add_check_options(check.add_argument, surroundings=False)
    _add_surroundings(check)
    _add_scope(check)
    history_command.add_store_options(check)
    add_outputs(check)


def _add_hosts(check: argparse.ArgumentParser) -> None:
    """The hosts to check and how SSH reaches them."""
    check.add_argument(
        "hosts",
        nargs="?",
        type=Path,
        metavar="HOSTS",
        help="hosts file; without it, this machine is checked without SSH",
    )
    check.add_argument(
        "--nodes", metavar="EXPR", help='hostlist expression instead of a file, e.g. "$SLURM_JOB_NODELIST"'
    )
    check.add_argument(
        "--python",
        help="the Python interpreter on the nodes (default python3; checking this machine, the one "
        "preflight runs in)",
    )
    check.add_argument(
        "-i", "--identity", action="append", default=[], metavar="FILE", help="SSH private key (repeatable)"
    )
    check.add_argument(
        "--ssh-config",
        type=Path,
        default=Path("~/.ssh/config").expanduser(),
        metavar="FILE",
        help="ssh_config to resolve host names (default ~/.ssh/config)",
    )
    check.add_argument(
        "--known-hosts",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="known_hosts file (repeatable; default: the user's and the system's)",
    )
    check.add_argument(
        "--accept-new-host-keys",
        action="store_true",
        help="accept host keys not in known_hosts (a changed key is always refused)",
    )


def _add_run_settings(check: argparse.ArgumentParser) -> None:
    """The config file, the checks chosen, the run's deadlines and the job's port and backend."""
    check.add_argument("--config", type=Path, metavar="FILE", help="TOML expectations and thresholds")
    check.add_argument("--only", type=names, metavar="CHECKS", help="comma list of checks to run")
    check.add_argument("--skip", type=names, metavar="CHECKS", help="comma list of checks to skip")
    check.add_argument("--timeout", type=float, metavar="S", help="deadline of the whole run (default 300)")
    check.add_argument(
        "--connect-timeout", type=float, metavar="S", help="deadline to connect to one host (default 10)"
    )
    check.add_argument("--fanout", type=int, metavar="N", help="hosts worked on at once (default 64)")
    check.add_argument("--port", type=int, metavar="P", help="the job's rendezvous port (default 29500)")
    check.add_argument(
        "--backend",
        choices=("nccl", "gloo"),
        help="all-reduce and DDP backend (default: NCCL where the nodes have GPUs, gloo otherwise)",
    )
    check.add_argument(
        "--baseline",
        type=Path,
        metavar="RUN.json",
        help="compare with a previous known-good run (nodes, versions, GPUs, bandwidth)",
    )


def _add_check_options(add_argument: Callable[..., object], *, surroundings: bool) -> None:
    """Add the checks' own options (``Check.settings.options``), in registry order: those listed
    with the job's surroundings, or the others."""
    for check in all_checks():
        for option in check.settings.options if check.settings is not None else ():
            if option.surroundings == surroundings:
                add_argument(
                    option.flag,
                    dest=option.dest,
                    action="append" if option.repeat else "store",
                    metavar=option.metavar,
                    help=option.help,
                )


def _add_surroundings(check: argparse.ArgumentParser) -> None:
    """What the job finds on the nodes: the checks' surroundings options and its environment."""
    surroundings = check.add_argument_group("the job's surroundings (paths are on the nodes)")
    _add_check_options(surroundings.add_argument, surroundings=True)
    surroundings.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a variable the job's launcher sets on every node (repeatable)",
    )
    surroundings.add_argument(
        "--env-file",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="NAME=VALUE lines the job's launcher sets on every node",
    )


def _add_scope(check: argparse.ArgumentParser) -> None:
    """How far the run goes: one node or the allocation, the nodes needed, the profile, and the
    switches behind the nodes."""
    check.add_argument(
        "--local",
        action="store_true",
        help="this node only, no job between nodes: a Slurm prolog or health-check program "
        "(one line per finding, exit status below 126)",
    )
    check.add_argument(
        "--slurm",
        action="store_true",
        help="reach the allocation's nodes with srun, one job step per node and phase "
        "(automatic inside an allocation when no hosts file is given)",
    )
    check.add_argument(
        "--min-nodes",
        type=int,
        metavar="N",
        help="pass when at least N nodes are good (the bad ones are named, and left out of --good-hosts)",
    )
    profile = check.add_mutually_exclusive_group()
    profile.add_argument(
        "--quick",
        action="store_const",
        const="quick",
        dest="profile",
        help="facts, versions, ports and a short all-reduce (no pair tests, no DDP)",
    )
    profile.add_argument(
        "--deep",
        action="store_const",
        const="deep",
        dest="profile",
        help="a longer sweep, every pair tested, more DDP steps",
    )
    check.add_argument(
        "--topology",
        type=Path,
        metavar="FILE",
        help="Slurm topology.conf: names the switch behind slow traffic between node sets",
    )
