"""``preflight history``: repeat offenders by part and by node, findings that come and go, and each
GPU's and node's rates over time (each pair's too with ``--pairs``, a node's own pairs with
``--node``), in the terminal or as JSON; ``--forget-before`` prunes. The
options of ``preflight check`` that choose the store are here too."""

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
from preflight.history.queries import Filters, flaky, offenders, trends
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


def add_parser(commands: Any) -> None:
    parser = commands.add_parser(
        "history", help="what the store remembers: repeat offenders, flaky findings, trends"
    )
    parser.add_argument("--history", metavar="PATH|URL", help="the history store (default as for check)")
    parser.add_argument("--config", type=Path, metavar="FILE", help="TOML config ([history] store)")
    parser.add_argument("--json", action="store_true", help="print JSON instead of tables")
    parser.add_argument("--node", default="", help="only this node")
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
        filters = Filters(since=iso(parse_date(args.since)), node=args.node, part=args.part, pairs=args.pairs)
        answer = {
            "offenders": [o.to_dict() for o in offenders(store, filters)],
            "flaky": [f.to_dict() for f in flaky(store, filters)],
            "trends": [t.to_dict() for t in trends(store, filters)],
        }
    finally:
        store.close()
    if args.json:
        shown = {"store": store.target, "since": filters.since, "pairs_left_out": not filters.with_pairs}
        print(json.dumps({**shown, **answer}, indent=2))
    else:
        console = Console()
        _print(console, answer)
        if not filters.with_pairs:
            console.print("pairs' trends left out: --pairs shows them, --node a node's own")
    return ExitCode.OK


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
            f"{last['started_at']} {last['check']}/{last['cause']}",
        )
    console.print(offenders if answer["offenders"] else "no repeat offenders")
    flaky = Table(title="Findings that come and go", title_justify="left")
    for column in ("finding", "node", "failed", "of runs"):
        flaky.add_column(column)
    for f in answer["flaky"]:
        flaky.add_row(f["key"], f["node"], str(f["failed"]), str(f["checked"]))
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
