"""``preflight history``: repeat offenders by part and by node, findings that come and go, and each
GPU's and node's rates over time (each pair's too with ``--pairs``, a node's own pairs with
``--node``), in the terminal or as JSON; ``--runs`` lists the runs kept; ``--forget-before`` prunes.
``--node`` takes a node's identity or any name that reached it. The options of ``preflight check``
that choose the store are here too."""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from preflight.errors import ExitCode
from preflight.history.queries import (
    Filters,
    flaky,
    legacy_names,
    offenders,
    resolve_node,
    runs_kept,
    trends,
)
from preflight.history.record import WHOLE_RUN
from preflight.history.settings import HistorySection, iso, parse_date, parse_keep, store_target
from preflight.history.store import open_store
from preflight.history.write import forget_before


def add_store_options(parser: argparse.ArgumentParser | Any) -> None:
    """``--history``, ``--no-history`` and ``--history-keep``, for ``preflight check``."""
    parser.add_argument(
        "--history",
        metavar="PATH|URL",
        help="the history store: a SQLite file or postgresql://... (default "
        "$XDG_STATE_HOME/preflight/history.sqlite)",
    )
    parser.add_argument("--no-history", action="store_true", help="neither read nor write the history store")
    parser.add_argument(
        "--history-keep", metavar="SPAN", help="forget runs older than SPAN (90d, 12w) after the run"
    )


def section_of(section: HistorySection, args: argparse.Namespace) -> HistorySection:
    """``[history]`` with the command line's options over it."""
    if getattr(args, "history", None):
        section = dataclasses.replace(section, store=args.history)
    if getattr(args, "no_history", False):
        section = dataclasses.replace(section, enabled=False)
    if getattr(args, "history_keep", None):
        parse_keep(args.history_keep)
        section = dataclasses.replace(section, keep=args.history_keep)
    if section.keep:
        parse_keep(section.keep)
    return section


def add_parser(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    parser = commands.add_parser(
        "history", help="what the store remembers: repeat offenders, flaky findings, trends"
    )
    parser.add_argument("--history", metavar="PATH|URL", help="the history store (default as for check)")
    parser.add_argument("--config", type=Path, metavar="FILE", help="TOML config ([history] store)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument(
        "--node", default="", help="only this node (its identity, or a name that reached it: address, alias)"
    )
    parser.add_argument(
        "--runs", action="store_true", help="list the runs kept, newest first (with --node: that node's)"
    )
    parser.add_argument("--part", default="", help="only this part (GPU serial or UUID, HCA GUID/port, MAC)")
    parser.add_argument(
        "--pairs", action="store_true", help="the pairs' trends too (--node shows its own pairs' always)"
    )
    parser.add_argument(
        "--since", default="30d", metavar="DATE|SPAN", help="from this date or span back (default 30d)"
    )
    parser.add_argument(
        "--forget-before", metavar="DATE|SPAN", help="delete the runs before DATE, then report"
    )


def run(args: argparse.Namespace, section: HistorySection) -> ExitCode:
    target = args.history or store_target(section)
    store = open_store(target, create=False)
    try:
        if args.forget_before:
            gone = forget_before(store, parse_date(args.forget_before))
            print(f"forgot {gone} run{'s' if gone != 1 else ''} before {args.forget_before}", file=sys.stderr)
        node = resolve_node(store, args.node)
        filters = Filters(since=iso(parse_date(args.since)), node=node, part=args.part, pairs=args.pairs)
        if args.runs:
            return _runs(
                args, store.target, filters, [r.to_dict() for r in runs_kept(store, filters.since, node)]
            )
        answer = {
            "offenders": [o.to_dict() for o in offenders(store, filters)],
            "flaky": [_readable(f.to_dict()) for f in flaky(store, filters)],
            "trends": [t.to_dict() for t in trends(store, filters)],
            "legacy_names": legacy_names(store),
        }
    finally:
        store.close()
    if args.json:
        shown = {"store": store.target, "since": filters.since, "pairs_left_out": not filters.with_pairs}
        if node != args.node:
            shown["node"] = node
        print(json.dumps({**shown, **answer}, indent=2))
    else:
        console = Console()
        if node != args.node:
            console.print(f"{args.node} is node {node}", highlight=False)
        _print(console, answer)
        if not filters.with_pairs:
            console.print("pairs' trends left out: --pairs shows them, --node a node's own")
        left = [n for n in answer["legacy_names"] if n["node"] == n["name"] and n["how"].startswith("left")]
        if left:
            console.print(
                "kept before node identities, not joined to a node: "
                + "; ".join(f"{n['name']} ({n['how'].removeprefix('left as it is: ')})" for n in left),
                highlight=False,
            )
    return ExitCode.OK


def _runs(args: argparse.Namespace, target: str, filters: Filters, runs: list[dict[str, Any]]) -> ExitCode:
    if args.json:
        shown: dict[str, Any] = {"store": target, "since": filters.since}
        if filters.node:
            shown["node"] = filters.node
        print(json.dumps({**shown, "runs": runs}, indent=2))
        return ExitCode.OK
    table = Table(title="Runs kept, newest first", title_justify="left")
    for column in ("when", "inventory", "profile", "verdict", "nodes", "failed", "version", "JSON report"):
        table.add_column(column)
    for run in runs:
        table.add_row(
            run["started_at"],
            run["inventory"] + (" (--local)" if run["local"] and run["inventory"] != "(local)" else ""),
            run["profile"],
            run["verdict"],
            str(run["nodes_checked"]),
            str(run["nodes_failed"]),
            run["tool_version"],
            run["report"] or "not written",
        )
    Console().print(table if runs else f"no run kept since {filters.since}")
    return ExitCode.OK


def finding_in_words(check: str, node: str, cause: str) -> str:
    """A finding as people read it: ``allreduce on pfnode2: slow node``."""
    where = "the whole run" if node == WHOLE_RUN else node
    return f"{check} on {where}: {cause.replace('_', ' ')}"


def _readable(row: dict[str, Any]) -> dict[str, Any]:
    """A flaky finding with its check, cause and the finding in words beside its key."""
    check, _, rest = str(row["key"]).partition("/")
    cause = rest.rpartition("/")[2]
    return {**row, "check": check, "cause": cause, "finding": finding_in_words(check, row["node"], cause)}


def _print(console: Console, answer: dict[str, Any]) -> None:
    offenders = Table(title="Repeat offenders", title_justify="left")
    for column in ("by", "name", "failed on / with", "failures", "last"):
        offenders.add_column(column)
    for o in answer["offenders"]:
        last = o["failures"][-1]
        offenders.add_row(
            o["by"],
            o["name"],
            ", ".join(o["others"]),
            str(len(o["failures"])),
            f"{last['started_at']}: {finding_in_words(last['check'], last['node'], last['cause'])}",
        )
    console.print(offenders if answer["offenders"] else "no repeat offenders")
    flaky = Table(title="Findings that come and go", title_justify="left")
    for column in ("check", "node", "cause", "failed", "of runs"):
        flaky.add_column(column)
    for f in answer["flaky"]:
        flaky.add_row(
            f["check"], f["node"], f["cause"].replace("_", " "), str(f["failed"]), str(f["checked"])
        )
    console.print(flaky if answer["flaky"] else "no flaky findings")
    trend = Table(title="Trends", title_justify="left")
    for column in ("metric", "node", "part", "runs", "mean", "low", "high", "last run"):
        trend.add_column(column)
    for t in answer["trends"]:
        trend.add_row(
            t["metric"],
            t["node"],
            t["part"],
            str(t["runs"]),
            f"{t['mean']:.1f}",
            f"{t['low']:.1f}",
            f"{t['high']:.1f}",
            t["last_at"],
        )
    console.print(trend if answer["trends"] else "no rates measured")
