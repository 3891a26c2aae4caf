"""The output options ``preflight check`` and ``preflight report`` share: the report files, the
node lists handed back to the job's launcher, and the terminal's quiet mode."""

from __future__ import annotations

import argparse
from pathlib import Path

# The options that name a file a run writes besides the report formats (reports.FILE_FORMATS).
HANDBACK_OUTPUTS = ("good_hosts", "bad_hosts")


def add_outputs(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="write the JSON report ('-' for stdout)")
    parser.add_argument("--junit", metavar="PATH", help="write JUnit XML (one testcase per check and host)")
    parser.add_argument("--html", metavar="PATH", help="write the single-file HTML report")
    parser.add_argument(
        "--prometheus", metavar="PATH", help="write node_exporter textfile metrics (a .prom file)"
    )
    parser.add_argument(
        "--good-hosts",
        type=Path,
        metavar="FILE",
        help="write the nodes that passed, one per line (srun -w ./FILE, hostfiles)",
    )
    parser.add_argument(
        "--bad-hosts",
        type=Path,
        metavar="FILE",
        help="write the nodes to leave out, one per line (srun -x ./FILE)",
    )
    parser.add_argument("-q", "--quiet", action="store_true", help="no progress and no summary table")
