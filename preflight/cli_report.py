"""``preflight report``'s command line: a saved run, rendered again without contacting a node."""

from __future__ import annotations

import argparse
from pathlib import Path

from preflight.cli_outputs import add_outputs


def add_report_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    report = commands.add_parser("report", help="re-render a saved run (no SSH)")
    report.add_argument("run", type=Path, metavar="RUN.json")
    add_outputs(report)
