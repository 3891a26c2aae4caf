"""The command line: ``preflight check``, ``preflight report``, ``preflight list``.

This is the one place that turns a :class:`PreflightError` into a one-line message and
an exit code; tracebacks only with ``--debug``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from rich.console import Console

from preflight import __version__
from preflight.config import load_config, with_overrides
from preflight.errors import ExitCode, PreflightError, UsageError
from preflight.files import write_atomic
from preflight.inventory import (
    HostSpec,
    build_inventory,
    jump_hosts,
    load_ssh_config,
    local_host,
    parse_nodelist,
    read_hosts_file,
)
from preflight.model import RunReport
from preflight.profiles import QUICK_CHECKS, Profile, apply_profile, expected_duration_s
from preflight.registry import all_checks, select_checks
from preflight.runner import RunRequest, execute
from preflight.topology import load_topology
from preflight.transport.ssh import KnownHosts, SshSettings


def _names(text: str) -> list[str]:
    return [name.strip() for name in text.split(",") if name.strip()]


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="preflight",
        description="Check a cluster before a multi-node training run.",
    )
    parser.add_argument("--version", action="version", version=f"preflight {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    check = commands.add_parser("check", help="check the hosts (or this machine) and report")
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
    check.add_argument("--python", help="the Python interpreter on the nodes (default python3)")
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
    check.add_argument("--config", type=Path, metavar="FILE", help="TOML expectations and thresholds")
    check.add_argument("--only", type=_names, metavar="CHECKS", help="comma list of checks to run")
    check.add_argument("--skip", type=_names, metavar="CHECKS", help="comma list of checks to skip")
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
    _add_outputs(check)

    report = commands.add_parser("report", help="re-render a saved run (no SSH)")
    report.add_argument("run", type=Path, metavar="RUN.json")
    _add_outputs(report)

    commands.add_parser("list", help="list the checks")
    return parser


def _add_outputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="write the JSON report ('-' for stdout)")
    parser.add_argument("--junit", metavar="PATH", help="write JUnit XML (one testcase per check and host)")
    parser.add_argument("--html", metavar="PATH", help="write the single-file HTML report")
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary table")


def _consoles(json_to_stdout: bool) -> tuple[Console, Console]:
    """(progress, summary) consoles. Progress goes to stderr; the summary to stdout unless
    stdout carries the JSON document."""
    progress = Console(stderr=True)
    summary = Console(stderr=True) if json_to_stdout else Console()
    return progress, summary


def _write_outputs(report: RunReport, args: argparse.Namespace, summary: Console) -> None:
    from reports import FILE_FORMATS
    from reports.terminal import print_report

    if not args.quiet:
        print_report(report, summary)
    for name, render in FILE_FORMATS.items():
        target = getattr(args, name, None)
        if target == "-":
            sys.stdout.write(render(report))
            sys.stdout.flush()
        elif target:
            write_atomic(Path(target), render(report))


def _inventory(args: argparse.Namespace) -> tuple[list[HostSpec], dict[str, HostSpec]]:
    """The hosts to check, and the ProxyJump hosts they go through, both resolved."""
    if args.hosts is not None and args.nodes:
        raise UsageError("give a hosts file or --nodes, not both")
    if args.nodes:
        specs = parse_nodelist(args.nodes)
    elif args.hosts is not None:
        specs = read_hosts_file(args.hosts)
    else:
        return [local_host()], {}
    ssh_config = load_ssh_config(args.ssh_config)
    hosts = build_inventory(specs, ssh_config)
    return hosts, jump_hosts(hosts, ssh_config)


def _raise_open_file_limit(hosts: int) -> None:
    """Every host keeps its SSH connection for the whole run: make room for a thousand of them
    (the soft limit is often 1,024; raising it up to the hard limit needs no privilege)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = 64 + 8 * hosts
    if soft != resource.RLIM_INFINITY and soft < wanted:
        ceiling = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, ceiling), hard))


def _check(args: argparse.Namespace) -> ExitCode:
    from reports.terminal import LiveProgress

    config = with_overrides(
        load_config(args.config),
        {
            "python": args.python,
            "timeout_s": args.timeout,
            "connect_timeout_s": args.connect_timeout,
            "fanout": args.fanout,
            "port": args.port,
        },
    )
    if config.run.fanout < 1:
        raise UsageError("--fanout must be at least 1")
    profile: Profile = args.profile or "standard"
    config = apply_profile(config, profile)
    only = args.only or (list(QUICK_CHECKS) if profile == "quick" else None)
    topology = args.topology or (Path(config.run.topology) if config.run.topology else None)
    if topology is not None:
        config = dataclasses.replace(config, switch_of=load_topology(topology))
    baseline = None
    if args.baseline is not None:
        from reports.json_report import load

        baseline = load(args.baseline)
    checks = select_checks(only, args.skip, has_baseline=baseline is not None)
    hosts, jumps = _inventory(args)
    _raise_open_file_limit(len(hosts))
    ssh = None
    if any(not h.local for h in hosts):
        known = KnownHosts(args.known_hosts or KnownHosts.default_paths())
        ssh = SshSettings(
            known_hosts=known,
            accept_new_host_keys=args.accept_new_host_keys,
            identity_files=tuple(args.identity),
            connect_timeout_s=config.run.connect_timeout_s,
            resolve_jump=jumps,
        )
    progress_console, summary = _consoles(args.json == "-")
    expected_s = expected_duration_s(config, len(hosts), [c.name for c in checks])
    if not args.quiet:
        progress_console.print(
            f"{profile} profile, {len(hosts)} host{'s' if len(hosts) != 1 else ''}: "
            f"expected to take about {expected_s:.0f} s",
            highlight=False,
        )
    progress = None if args.quiet else LiveProgress(progress_console, expected_s=expected_s)
    request = RunRequest(
        hosts=hosts, config=config, checks=checks, ssh=ssh, backend=args.backend, baseline=baseline
    )
    report = execute(request, progress)
    _write_outputs(report, args, summary)
    return report.exit_code


def _report(args: argparse.Namespace) -> ExitCode:
    from reports.json_report import load

    report = load(args.run)
    _write_outputs(report, args, _consoles(args.json == "-")[1])
    return report.exit_code


def _list() -> ExitCode:
    for check in all_checks():
        print(f"{check.name:<12} {check.title}")
    return ExitCode.OK


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return ExitCode.USAGE_ERROR
    signal.signal(signal.SIGTERM, _terminate)  # a CI runner's cancel ends the run like Ctrl-C
    try:
        if args.command == "check":
            return int(_check(args))
        if args.command == "report":
            return int(_report(args))
        return int(_list())
    except PreflightError as exc:
        if args.debug:
            raise
        print(f"preflight: error: {exc}", file=sys.stderr)
        return int(exc.exit_code)
    except KeyboardInterrupt:
        print("preflight: interrupted", file=sys.stderr)
        return int(ExitCode.INTERRUPTED)
    except BrokenPipeError:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return int(ExitCode.OK)


if __name__ == "__main__":
    sys.exit(main())
