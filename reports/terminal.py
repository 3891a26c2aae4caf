"""The terminal view: live per-host progress on stderr, then the findings table and the verdict.

Everything a node sent is printed as plain text (never as markup) with escape sequences
and control characters removed. ``NO_COLOR`` and non-terminals are honoured by rich.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Sequence

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress_bar import ProgressBar
from rich.spinner import Spinner
from rich.table import Table
from rich.text import Text

from preflight.escape import printable
from preflight.explained import explain_command
from preflight.model import CheckResult, RunReport
from preflight.nodeset import fold
from preflight.status import LABELS, overall
from reports.summary import headline, kept_as_line, ordered, time_spent

STYLES = {"pass": "green", "warn": "yellow", "fail": "bold red", "error": "bold magenta", "skip": "dim"}
_SHOWN_ACTIVE_HOSTS = 6
# The report's last line, when it named findings an explanation covers: the command that shows them.
EXPLAIN_LINE = "what each finding means: "


class LiveProgress:
    """Progress on a console: a live view on terminals, one plain line per event elsewhere."""

    def __init__(self, console: Console, expected_s: float | None = None) -> None:
        self.console = console
        # The run's expected duration: a bar with the time left, on terminals.
        self._expected_s = expected_s
        self._started = time.monotonic()
        self._lock = threading.Lock()
        self._phases: dict[str, str] = {}
        self._checks: list[tuple[str, list[CheckResult] | None]] = []
        self._live: Live | None = None
        if console.is_terminal:
            self._live = Live(
                console=console, get_renderable=self._render, refresh_per_second=8, transient=True
            )
            self._live.start()

    def hosts_started(self, names: Sequence[str]) -> None:
        with self._lock:
            self._phases = dict.fromkeys(names, "waiting")
        if self._live is None:
            self.console.print(f"checking {len(names)} host{'s' if len(names) != 1 else ''}", highlight=False)

    def host(self, name: str, phase: str, *, error: str | None = None) -> None:
        with self._lock:
            self._phases[name] = phase
        if self._live is None and error:
            self.console.print(Text(f"  {printable(name)}: {printable(error, keep_newlines=False)}"))

    def check_started(self, name: str) -> None:
        with self._lock:
            self._checks.append((name, None))

    def check_done(self, name: str, results: Sequence[CheckResult]) -> None:
        with self._lock:
            self._checks = [(n, list(results) if n == name else r) for n, r in self._checks]
        if self._live is None:
            status = overall(r.status for r in results)
            self.console.print(Text.assemble(f"  {name:<12} ", (LABELS[status], STYLES[status])))

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def _render(self) -> RenderableType:
        with self._lock:
            phases = dict(self._phases)
            checks = list(self._checks)
        counts = Counter(phases.values())
        finished = counts["done"] + counts["error"]
        bar = Table.grid(padding=(0, 1))
        bar.add_row(
            Spinner("dots") if finished < len(phases) else Text("✔", "green"),
            Text("facts", style="bold"),
            ProgressBar(total=max(1, len(phases)), completed=finished, width=30),
            Text(
                f"{finished}/{len(phases)} hosts"
                + (f", {counts['error']} unreachable" if counts["error"] else "")
            ),
        )
        active = [n for n, p in phases.items() if p in ("connecting", "probing")][:_SHOWN_ACTIVE_HOSTS]
        rows: list[RenderableType] = [bar]
        if self._expected_s:
            elapsed = time.monotonic() - self._started
            left = self._expected_s - elapsed
            eta = Table.grid(padding=(0, 1))
            eta.add_row(
                Text(" "),
                Text("run  ", style="bold"),
                ProgressBar(total=self._expected_s, completed=min(elapsed, self._expected_s), width=30),
                Text(
                    f"{elapsed:.0f} s, about {left:.0f} s left"
                    if left >= 1
                    else f"{elapsed:.0f} s, nearly done"
                ),
            )
            rows.append(eta)
        if active and finished < len(phases):
            rows.append(Text("  " + ", ".join(f"{printable(n)} {phases[n]}" for n in active), style="dim"))
        for name, results in checks:
            if results is None:
                running = Table.grid()
                running.add_row(Spinner("dots"), Text(f" {name}"))
                rows.append(running)
            else:
                status = overall(r.status for r in results)
                rows.append(
                    Text.assemble(
                        ("✔ " if status == "pass" else "• "),
                        (f"{name:<12}", "bold"),
                        (LABELS[status], STYLES[status]),
                    )
                )
        return Group(*rows)


def _status_text(result: CheckResult) -> Text:
    """The status column: a note (a finding that passes but that a reader should see) says so."""
    if result.is_note:
        return Text("note", style="cyan")
    return Text(LABELS[result.status], style=STYLES[result.status])


def findings_table(report: RunReport) -> Table:
    table = Table(show_header=True, header_style="bold", box=None, pad_edge=False, expand=False)
    table.add_column("check", no_wrap=True)
    table.add_column("status", no_wrap=True)
    table.add_column("hosts", overflow="fold", max_width=28)
    table.add_column("finding", overflow="fold")
    for result in ordered(list(report.results)):
        table.add_row(
            result.check,
            _status_text(result),
            Text(printable(fold(result.hosts), keep_newlines=False)),
            Text(printable(result.summary, keep_newlines=False)),
        )
    return table


def print_report(report: RunReport, console: Console) -> None:
    reachable = sum(1 for h in report.hosts if h.reachable)
    console.print(
        Text(
            f"preflight {report.tool_version} · {reachable}/{len(report.hosts)} hosts · "
            f"{report.duration_s:.1f} s",
            style="dim",
        )
    )
    if (kept := kept_as_line(report)) is not None:
        console.print(Text(printable(kept, keep_newlines=False), style="dim"))
    if (spent := time_spent(report)) is not None:
        console.print(Text(f"time: {printable(spent, keep_newlines=False)}", style="dim"))
    console.print(findings_table(report))
    style = {"pass": "bold green", "fail": "bold red", "error": "bold magenta"}[report.verdict]
    console.print()
    console.print(Text(printable(headline(report), keep_newlines=False), style=style))
    console.print(Text(f"exit {int(report.exit_code)}", style="dim"))


def print_explain_line(report: RunReport, console: Console) -> None:
    """The terminal report's last line: the command that explains the items its findings named."""
    if (command := explain_command(report.results)) is not None:
        console.print(Text(f"{EXPLAIN_LINE}{command}", style="dim"), soft_wrap=True)
