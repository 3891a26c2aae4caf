"""The command line: ``preflight check``, ``preflight report``, ``preflight history``, ``preflight list``.

This is the one place that turns a :class:`PreflightError` into a one-line message and
an exit code; tracebacks only with ``--debug``.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import logging
import os
import resource
import shutil
import signal
import socket
import sys
import threading
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from rich.console import Console

from preflight import __version__
from preflight.check import Check
from preflight.cli_check import add_check_command
from preflight.cli_outputs import HANDBACK_OUTPUTS
from preflight.cli_report import add_report_command
from preflight.config import Config, RunSection, with_overrides
from preflight.config_file import load_config
from preflight.errors import ExitCode, PreflightError, UsageError
from preflight.files import unwritable, write_atomic
from preflight.handback import hosts_file_text
from preflight.history import command as history_command
from preflight.history.record import RunInfo
from preflight.history.session import HistoryRequest
from preflight.history.settings import HistorySection
from preflight.inventory import (
    HostSpec,
    build_inventory,
    jump_hosts,
    load_ssh_config,
    local_host,
    parse_nodelist,
    read_hosts_file,
)
from preflight.jobenv import job_environment
from preflight.model import RunReport
from preflight.profiles import Profile, apply_profile, checks_of, expected_duration_s
from preflight.registry import all_checks, select_checks
from preflight.runner import RunRequest, execute
from preflight.topology import load_topology
from preflight.transport.srun import SrunSettings, allocation_inventory, in_allocation
from preflight.transport.ssh import KnownHosts, SshSettings


def _parser() -> argparse.ArgumentParser:
    """The options every command takes, then each command's subparser, declared in a module of its
    own (``cli_check``, ``cli_report``, ``history.command``) but ``list``, which has no options."""
    parser = argparse.ArgumentParser(
        prog="preflight",
        description="Check a cluster before a multi-node training run.",
    )
    parser.add_argument("--version", action="version", version=f"preflight {__version__}")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    add_check_command(commands)
    add_report_command(commands)
    history_command.add_parser(commands)
    _add_list_command(commands)
    _add_explain_command(commands)
    return parser


def _add_list_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    commands.add_parser("list", help="list the checks")


def _add_explain_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    explain = commands.add_parser(
        "explain",
        help="what a finding item means, how it is measured, its threshold and what to do",
        description="Explain finding items (details.item): ITEM, or CHECK/ITEM where two checks "
        "share a word. With no item, list them.",
    )
    explain.add_argument("items", nargs="*", metavar="ITEM")


def _consoles(json_to_stdout: bool) -> tuple[Console, Console]:
    """(progress, summary) consoles. Progress goes to stderr; the summary to stdout unless
    stdout carries the JSON document."""
    progress = Console(stderr=True)
    summary = Console(stderr=True) if json_to_stdout else Console()
    return progress, summary


def _write_outputs(report: RunReport, args: argparse.Namespace, summary: Console) -> None:
    from reports import FILE_FORMATS, renderer
    from reports.terminal import print_explain_line, print_report

    if getattr(args, "local", False):
        from reports.lines import finding_lines

        for line in finding_lines(report):
            summary.print(line, markup=False, highlight=False, soft_wrap=True)
    elif not args.quiet:
        from reports.lines import handback_lines

        print_report(report, summary)
        # Which nodes to use is a choice among several; on one node the verdict says it all.
        for line in handback_lines(report) if len(report.hosts) > 1 else []:
            summary.print(line, markup=False, highlight=False, soft_wrap=True)
        print_explain_line(report, summary)
    _write_handback(report, args)
    for name in FILE_FORMATS:
        target = getattr(args, name, None)
        if target == "-":
            sys.stdout.write(renderer(name)(report))
            sys.stdout.flush()
        elif target:
            write_atomic(Path(target), renderer(name)(report))


def _write_handback(report: RunReport, args: argparse.Namespace) -> None:
    if args.good_hosts is None and args.bad_hosts is None:
        return
    from reports.lines import handback_of

    handback = handback_of(report)
    if args.good_hosts is not None:
        write_atomic(args.good_hosts, hosts_file_text(handback.good))
    if args.bad_hosts is not None:
        write_atomic(args.bad_hosts, hosts_file_text([b.name for b in handback.bad]))


def _local_node() -> HostSpec:
    """This node, named as Slurm names it in a prolog (``SLURMD_NODENAME``), else by its short
    host name: the name an operator drains."""
    name = os.environ.get("SLURMD_NODENAME") or socket.gethostname().split(".")[0] or "localhost"
    return HostSpec(name=name, address="localhost", local=True, source="(local)")


def _inventory(args: argparse.Namespace) -> tuple[list[HostSpec], dict[str, HostSpec]]:
    """The hosts to check, and the ProxyJump hosts they go through, both resolved."""
    if args.hosts is not None and args.nodes:
        raise UsageError("give a hosts file or --nodes, not both")
    if args.local:
        if args.hosts is not None or args.nodes:
            raise UsageError("--local checks this node only: give no hosts file or --nodes")
        return [_local_node()], {}
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


def _with_options(config: Config, args: argparse.Namespace) -> Config:
    """Each check's settings with its command-line options over the config's, and the job's
    environment from the command line over the config's. Only what can be judged before any node
    is contacted is: paths, for one, are on the nodes."""
    for check in all_checks():
        if check.settings is None:
            continue
        section = given = config.section(check.settings.section)
        for option in check.settings.options:
            value = getattr(args, option.dest)
            if value is None:
                continue
            try:
                section = option.apply(section, tuple(value) if option.repeat else value)
            except ValueError as exc:
                raise UsageError(f"{option.flag}: {exc}") from None
        if section != given:
            config = config.with_sections(section)
    job_env = job_environment(config.job_env, args.env_file, args.env)
    return dataclasses.replace(config, job_env=job_env)


def _with_own_python(config: Config, args: argparse.Namespace) -> Config:
    """The check of this machine (no hosts file) runs with the interpreter preflight runs in, the
    environment it was installed into, unless ``--python``, ``PREFLIGHT_PYTHON`` or ``[run] python``
    names another. Nodes reached over SSH or srun (and ``--local``, a prolog run by Slurm outside the
    training environment) keep ``python3``."""
    given = args.python is not None or "PREFLIGHT_PYTHON" in os.environ
    if given or config.run.python != RunSection().python or not sys.executable:
        return config
    return dataclasses.replace(config, run=dataclasses.replace(config.run, python=sys.executable))


def _check_outputs(args: argparse.Namespace) -> None:
    """Every file the run will write can be written, before any node is contacted: a run of an
    hour must not end in a report it cannot save."""
    from reports import FILE_FORMATS

    for name in (*FILE_FORMATS, *HANDBACK_OUTPUTS):
        target = getattr(args, name, None)
        if target is None or str(target) == "-":
            continue
        why = unwritable(Path(target))
        if why is not None:
            raise UsageError(f"--{name.replace('_', '-')} {target}: {why}")


def _check_lists(args: argparse.Namespace) -> None:
    for option in ("only", "skip"):
        if getattr(args, option) == []:
            raise UsageError(f"--{option}: no check named (a comma list of check names; see preflight list)")


def _run_config(args: argparse.Namespace) -> tuple[Config, Profile]:
    """The run's configuration: the file, the command line over it, the profile, the topology."""
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
    config = _with_options(config, args)
    profile: Profile = args.profile or "standard"
    config = apply_profile(config, profile)
    topology = args.topology or (Path(config.run.topology) if config.run.topology else None)
    if topology is not None:
        config = dataclasses.replace(config, switch_of=load_topology(topology))
    return config, profile


def _selected(args: argparse.Namespace, profile: Profile, has_baseline: bool) -> list[Check]:
    """The checks to run: the profile's or --only's, less --skip; with --local, those of one node."""
    checks = select_checks(args.only or checks_of(profile), args.skip, has_baseline=has_baseline)
    if args.local:
        between = [c.name for c in checks if not c.node_local and c.name in (args.only or ())]
        if between:
            raise UsageError(f"--local: {', '.join(between)} runs between nodes, not on one node")
        checks = [c for c in checks if c.node_local]
    return checks


def _reached_how(args: argparse.Namespace) -> tuple[list[HostSpec], dict[str, HostSpec], SrunSettings | None]:
    """The nodes and how they are reached: the allocation's through srun, or the hosts file's (or
    this machine) with their jump hosts."""
    if args.slurm or (in_allocation() and args.hosts is None and not args.local):
        if args.hosts is not None or args.local:
            raise UsageError("--slurm checks the allocation's nodes: give no hosts file or --local")
        srun, hosts = allocation_inventory(nodes=args.nodes)
        if shutil.which(srun.srun) is None:
            raise UsageError(f"{srun.srun} not found on PATH: give a hosts file to check the nodes over SSH")
        return list(hosts), {}, srun
    hosts, jumps = _inventory(args)
    return list(hosts), jumps, None


def _check(args: argparse.Namespace) -> ExitCode:
    from reports.terminal import LiveProgress

    _check_lists(args)
    _check_outputs(args)
    config, profile = _run_config(args)
    baseline = None
    if args.baseline is not None:
        from reports.json_report import load

        baseline = load(args.baseline)
    checks = _selected(args, profile, baseline is not None)
    hosts, jumps, srun = _reached_how(args)
    if srun is None and args.hosts is None and not args.nodes and not args.local:
        config = _with_own_python(config, args)
    if args.min_nodes is not None and not 1 <= args.min_nodes <= len(hosts):
        checked = len(hosts)
        raise UsageError(f"--min-nodes must be from 1 to the {checked} nodes checked, not {args.min_nodes}")
    _raise_open_file_limit(len(hosts))
    ssh = None
    if srun is None and any(not h.local for h in hosts):
        known = KnownHosts(args.known_hosts or KnownHosts.default_paths())
        ssh = SshSettings(
            known_hosts=known,
            accept_new_host_keys=args.accept_new_host_keys,
            identity_files=tuple(args.identity),
            connect_timeout_s=config.run.connect_timeout_s,
            silence_s=config.run.silence_s,
            resolve_jump=jumps,
        )
    progress_console, summary = _consoles(args.json == "-")
    expected_s = expected_duration_s(config, len(hosts), [c.name for c in checks])
    if not args.quiet and not args.local:
        progress_console.print(
            f"{profile} profile, {len(hosts)} host{'s' if len(hosts) != 1 else ''}: "
            f"expected to take about {expected_s:.0f} s",
            highlight=False,
        )
    progress = None if args.quiet or args.local else LiveProgress(progress_console, expected_s=expected_s)
    history = HistoryRequest(
        history_command.section_of(config.section(HistorySection), args),
        RunInfo(
            inventory=_inventory_name(args),
            profile=profile,
            local=bool(args.local),
            report=str(Path(args.json).resolve()) if args.json and args.json != "-" else "",
        ),
    )
    request = RunRequest(
        hosts=hosts,
        config=config,
        checks=checks,
        ssh=ssh,
        backend=args.backend,
        baseline=baseline,
        min_nodes=args.min_nodes,
        srun=srun,
        history=history,
    )
    # The verdict is out (files written, summary printed) before the connections are closed.
    report = execute(request, progress, publish=lambda done: _write_outputs(done, args, summary))
    if args.local and report.exit_code == ExitCode.INTERRUPTED:
        return ExitCode.HOSTS_UNCHECKED  # a prolog's status above 125 reads as a signal to Slurm
    return report.exit_code


def _inventory_name(args: argparse.Namespace) -> str:
    if args.hosts is not None:
        return str(args.hosts)
    return args.nodes or ("(local)" if args.local else "(this machine)")


def _history(args: argparse.Namespace) -> ExitCode:
    return history_command.run(args, load_config(args.config).section(HistorySection))


def _report(args: argparse.Namespace) -> ExitCode:
    from reports.json_report import load

    _check_outputs(args)
    report = load(args.run)
    _write_outputs(report, args, _consoles(args.json == "-")[1])
    return report.exit_code


def _list() -> ExitCode:
    for check in all_checks():
        print(f"{check.name:<12} {check.title}")
    return ExitCode.OK


def _explain(items: Sequence[str]) -> ExitCode:
    from preflight.explain import text_lines
    from preflight.explained import explained_items, lookup

    known = explained_items()
    if not items:
        for explained in known:
            print(f"{explained.key:<40} {explained.first_sentence}")
        return ExitCode.OK
    found = [e for item in items for e in lookup(item, known)]  # all named, before any is printed
    print("\n\n".join("\n".join(text_lines(explained)) for explained in found))
    return ExitCode.OK


def _route_logging(*, debug: bool) -> None:
    """What libraries log (paramiko's "Exception (client): Error reading SSH protocol banner" and its
    traceback) goes to preflight's own stderr lines with ``--debug`` and nowhere without it: the
    terminal shows preflight's findings, which already say what went wrong with each host."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    if not debug:
        root.addHandler(logging.NullHandler())
        return
    shown = logging.StreamHandler(sys.stderr)
    shown.setFormatter(logging.Formatter("preflight: debug: %(name)s: %(message)s"))
    root.addHandler(shown)
    root.setLevel(logging.DEBUG)


def _terminate(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def run() -> None:
    """The ``preflight`` command: :func:`main`, then the process ends with its exit code once its own
    threads are done, without the interpreter's teardown. Freeing every module and object costs a
    tenth of a second of a run on the lab, and nothing of preflight waits on it: its files and
    connections are closed by then; a thread still ending something (a host's connection) is
    waited for, as the interpreter would."""
    code = main()
    for thread in threading.enumerate():
        if thread is not threading.main_thread() and not thread.daemon:
            thread.join()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):  # a reader gone (a closed pipe) loses nothing more
            stream.flush()
    os._exit(code)


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return ExitCode.USAGE_ERROR
    signal.signal(signal.SIGTERM, _terminate)  # a CI runner's cancel ends the run like Ctrl-C
    _route_logging(debug=args.debug)
    try:
        if args.command == "check":
            return int(_check(args))
        if args.command == "report":
            return int(_report(args))
        if args.command == "history":
            return int(_history(args))
        if args.command == "explain":
            return int(_explain(args.items))
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
