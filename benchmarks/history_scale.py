"""How long ``preflight history`` and one run's write take with a large store, on SQLite and on
PostgreSQL.

The store is filled with ``--runs`` runs (200) of ``--nodes`` nodes (1,000), each the recorded H100
node (tests/data/runs/h100_node.json) with 8 GPUs of distinct serials and the 9 HCA ports of a
recorded H100 node's ``/sys/class/infiniband`` tree with distinct node GUIDs: every run writes its
nodes, parts, versions, each GPU's compute rate, each node's bus bandwidth, the bus bandwidth of
each pair of a sparse plan (:data:`PAIR_STRIDES` partners a node, drawn again each run: about four
pairs a node), and a few findings (a slow GPU on 1 % of the nodes, some of them the same GPU
again). Runs are 4 hours apart, so the default ``--since 30d`` of ``preflight history`` covers 180
of them. Then it times the three queries of ``preflight history`` (repeat offenders, flaky
findings, trends; then with ``--pairs``), the write of one more run, and the report's ``history``
key for that run (the same answers for its own nodes, the latest values of the trends it draws),
and the rule that names a GPU or node slower than its own past (beside the same rule reading the
window's every value, as it did before it read each rate's last runs only), through the same code
a run uses, and prints the medians of ``--repeat`` tries. ``--store PATH``
keeps a filled SQLite store between runs of the benchmark (filling takes minutes).

PostgreSQL: a server is started for the benchmark from Debian's ``postgresql`` package, as the
test suite's fixture does (root needed), unless ``--postgres URL`` names one.

    .venv/bin/python benchmarks/history_scale.py                 # both backends
    .venv/bin/python benchmarks/history_scale.py --backend sqlite --nodes 100 --runs 20
    .venv/bin/python benchmarks/history_scale.py --backend sqlite --store /var/tmp/history-1000.sqlite
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checks.allreduce.measures import NODE_BUSBW, PAIR_BUSBW
from checks.compute.measures import GPU_TFLOPS
from preflight.history.annotate import PAST_RUNS, slower_than_own_past
from preflight.history.queries import Filters, flaky, offenders, trends
from preflight.history.record import (
    Finding,
    Part,
    Rate,
    RunInfo,
    RunRecord,
    finding_key,
    record_of,
)
from preflight.history.report_section import run_history
from preflight.history.schema import SCHEMA_VERSION
from preflight.history.settings import iso
from preflight.history.store import Store, open_store
from preflight.history.write import save
from preflight.model import HostReport, RunReport
from preflight.node import net
from tests.lab.postgres import PostgresUnavailable
from tests.lab.postgres import postgres_server as lab_postgres

ROOT = Path(__file__).resolve().parent.parent
H100 = json.loads((ROOT / "tests" / "data" / "runs" / "h100_node.json").read_text())
IB_TREE = ROOT / "tests" / "data" / "hardware" / "ib" / "sys-class-infiniband-h100"
GPUS = 8
RUN_EVERY = timedelta(hours=4)
# A sparse pair plan: each node tested with the node this many strides on, two strides a run.
PAIR_STRIDES = 2
INFO = RunInfo(inventory="hosts.txt", profile="standard", local=False)


def _node(index: int, ib: list[dict[str, Any]]) -> HostReport:
    facts = copy.deepcopy(H100)
    gpus = [copy.deepcopy(facts["gpus"][i % len(facts["gpus"])]) for i in range(GPUS)]
    for slot, gpu in enumerate(gpus):
        gpu["index"] = slot
        gpu["serial"] = f"1654922{index:05d}{slot}"
        gpu["uuid"] = f"GPU-{index:08x}-{slot:04x}-0000-0000-000000000000"
        gpu["pci_bus_id"] = f"00000000:{0x18 + slot * 0x10:02X}:00.0"
    facts["gpus"] = gpus
    ports = copy.deepcopy(ib)
    for number, port in enumerate(ports):
        port["node_guid"] = f"946d:ae03:{index:04x}:{number:04x}"
    facts["net"] = {"interfaces": [], "ib_devices": ports}
    name = f"node{index:04d}"
    return HostReport(name=name, address=name, hostname=name, reachable=True, facts=facts)


def template(nodes: int) -> RunRecord:
    """One run's nodes and parts, from the recorded facts; each run varies its time and rates."""
    ib = net.ib_devices(str(IB_TREE))
    hosts = [_node(i, ib) for i in range(nodes)]
    report = RunReport.build(tool_version="bench", started_at="", duration_s=1.0, hosts=hosts, results=[])
    return record_of(report, INFO)


def run_at(base: RunRecord, number: int, start: datetime) -> RunRecord:
    """Run ``number``: every GPU's rate and every node's busbw, and a slow GPU on 1 % of the nodes
    (every 7th of them the same GPU as the run before: repeats and flaky findings)."""
    at = iso(start + RUN_EVERY * number)
    gpus = [p for parts in base.parts.values() for p in parts if p.kind == "gpu"]
    rates = [
        Rate(GPU_TFLOPS.metric, p.node, p.part, 600.0 + (number * 31 + int(p.slot)) % 40 / 4) for p in gpus
    ]
    rates += [Rate(NODE_BUSBW.metric, node, "", 380.0 + number % 5) for node in base.parts]
    names = list(base.parts)
    rates += [
        Rate(PAIR_BUSBW.metric, a, b, 380.0 + (number + len(a)) % 7) for a, b in pairs_of(names, number)
    ]
    findings = []
    for k in range(max(1, len(names) // 100)):
        node = names[(number * 13 + k * 97) % len(names)] if k % 7 else names[k % len(names)]
        part: Part = base.parts[node][(number + k) % GPUS]
        findings.append(
            Finding(
                finding_key("compute", node, "slow_compute"),
                "compute",
                node,
                "slow_compute",
                "fail",
                node,
                part.part,
                "slow GPU",
            )
        )
    return dataclasses.replace(base, started_at=at, rates=rates, findings=findings)


def pairs_of(names: list[str], number: int) -> list[tuple[str, str]]:
    """Run ``number``'s pairs, each once with its names sorted: every node with the node
    :data:`PAIR_STRIDES` strides on, the strides drawn again each run."""
    if len(names) < 2:
        return []
    strides = {1 + (number * 7 + k * 131) % (len(names) - 1) for k in range(PAIR_STRIDES)}
    pairs = {tuple(sorted((a, names[(i + s) % len(names)]))) for i, a in enumerate(names) for s in strides}
    return sorted((a, b) for a, b in pairs)


def fill(store: Store, base: RunRecord, runs: int, start: datetime) -> float:
    began = time.perf_counter()
    for number in range(runs):
        save(store, run_at(base, number, start))
        if (number + 1) % 20 == 0:
            print(f"  {number + 1}/{runs} runs written", file=sys.stderr, flush=True)
    return time.perf_counter() - began


def history_answer(store: Store, since: str, pairs: bool = False) -> int:
    """What ``preflight history`` (``--pairs``) computes: its three queries; how many rows they gave."""
    filters = Filters(since=since, pairs=pairs)
    return len(offenders(store, filters)) + len(flaky(store, filters)) + len(trends(store, filters))


def own_past_over_the_window(store: Store, record: RunRecord, window_days: int) -> int:
    """The own-past rule as it was before it read each rate's last runs only: every value of the
    window, read for the run's nodes, and each series' median and spread; how many series."""
    since = iso(
        datetime.fromisoformat(record.started_at.replace("Z", "+00:00")) - timedelta(days=window_days)
    )
    nodes = sorted({rate.node for rate in record.rates})
    series: dict[tuple[str, str, str], list[float]] = {}
    for metric in (GPU_TFLOPS.metric, NODE_BUSBW.metric):
        for start in range(0, len(nodes), 500):
            chunk = nodes[start : start + 500]
            marks = ", ".join("?" for _ in chunk)
            rows = store.query(
                f"SELECT node, part, value FROM rates WHERE metric = ? AND started_at >= ?"
                f" AND started_at < ? AND node IN ({marks}) ORDER BY started_at",
                [metric, since, record.started_at, *chunk],
            )
            for node, part, value in rows:
                series.setdefault((metric, node, part), []).append(float(value))
    for values in series.values():
        typical = statistics.median(values)
        statistics.median([abs(v - typical) for v in values])
    return len(series)


def timed(action: Callable[[], Any], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        began = time.perf_counter()
        action()
        times.append(time.perf_counter() - began)
    return statistics.median(times)


def is_filled(target: str, args: argparse.Namespace) -> bool:
    """Whether the SQLite file ``target`` holds ``--runs`` runs of ``--nodes`` nodes, written at
    this preflight's schema version."""
    if not Path(target).exists():
        return False
    store = open_store(target)
    try:
        runs = store.query("SELECT COUNT(*), MAX(id) FROM runs")[0]
        nodes = store.query("SELECT COUNT(*) FROM nodes WHERE run_id = ?", (runs[1] or 0,))[0][0]
        stamp = store.query("SELECT value FROM meta WHERE key = 'benchmark_schema'")
    finally:
        store.close()
    return (runs[0], nodes, stamp) == (args.runs, args.nodes, [(str(SCHEMA_VERSION),)])


def fill_and_analyze(store: Store, base: RunRecord, runs: int, start: datetime) -> float:
    """Fill the store, then have the database gather its statistics, as a long-used store has."""
    filled = fill(store, base, runs, start)
    if store.dialect == "sqlite":
        store.execute("ANALYZE")
    else:
        store.connection.commit()  # VACUUM runs outside a transaction
        store.connection.autocommit = True
        store.execute("VACUUM ANALYZE")
        store.connection.autocommit = False
    return filled


def measure(backend: str, target: str, args: argparse.Namespace, kept: str | None = None) -> None:
    """Fill the store at ``target`` and time it; ``kept``: a SQLite file filled before (or now,
    when it is not), copied to ``target`` instead of filling it."""
    base = template(args.nodes)
    start = datetime(2026, 1, 1, tzinfo=UTC)
    filled = 0.0
    if kept is not None:
        if not is_filled(kept, args):
            Path(kept).unlink(missing_ok=True)
            store = open_store(kept)
            try:
                filled = fill_and_analyze(store, base, args.runs, start)
                with store.transaction():
                    store.execute(
                        "INSERT INTO meta (key, value) VALUES ('benchmark_schema', ?)", (str(SCHEMA_VERSION),)
                    )
            finally:
                store.close()
        shutil.copyfile(kept, target)
    store = open_store(target)
    try:
        if kept is None:
            filled = fill_and_analyze(store, base, args.runs, start)
        now = start + RUN_EVERY * args.runs
        since = iso(now - timedelta(days=30))
        rows = history_answer(store, since)
        query_s = timed(lambda: history_answer(store, since), args.repeat)
        with_pairs = history_answer(store, since, pairs=True)
        pairs_s = timed(lambda: history_answer(store, since, pairs=True), args.repeat)
        # The runs to write are made first: only their write is timed.
        more = [run_at(base, n, start) for n in range(args.runs, args.runs + args.repeat)]
        extra = iter(more)
        write_s = timed(lambda: save(store, next(extra)), args.repeat)
        key_s = timed(lambda: run_history(store, more[-1], 30), args.repeat)
        own_s = timed(lambda: slower_than_own_past(more[-1], store, 30, 0.1), args.repeat)
        window_s = timed(lambda: own_past_over_the_window(store, more[-1], 30), args.repeat)
    finally:
        store.close()
    parts = sum(len(p) for p in base.parts.values())
    print(
        f"{backend:10} {args.nodes} nodes x {GPUS} GPUs ({parts} parts a run) x {args.runs} runs "
        f"(filled in {filled:.0f} s): preflight history {query_s:.2f} s ({rows} rows; "
        f"--pairs {pairs_s:.2f} s, {with_pairs} rows), "
        f"one run's write {write_s:.2f} s, its report's history key {key_s:.2f} s; "
        f"the own-past rule {own_s:.2f} s (its last {PAST_RUNS} runs a rate), reading the window's"
        f" every value as before {window_s:.2f} s: {window_s / max(own_s, 1e-6):.1f}x",
        flush=True,
    )


@contextmanager
def postgres_server() -> Iterator[str]:
    """A throwaway server (tests/lab/postgres.py), or the reason there is none."""
    try:
        with lab_postgres() as url:
            yield url
    except PostgresUnavailable as exc:
        raise SystemExit(f"{exc}, or --postgres URL") from None


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--backend", choices=("sqlite", "postgresql", "both"), default="both")
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--store",
        metavar="PATH",
        help="a SQLite store kept between runs: filled when it does not hold --runs runs of --nodes"
        " nodes at this schema version, then copied for each measurement (SQLite only)",
    )
    parser.add_argument(
        "--postgres", metavar="URL", help="an empty PostgreSQL database to fill (default: start one)"
    )
    args = parser.parse_args()
    if args.backend in ("sqlite", "both"):
        with tempfile.TemporaryDirectory() as folder:
            measure("sqlite", str(Path(folder) / "history.sqlite"), args, args.store)
    if args.backend in ("postgresql", "both"):
        if args.postgres:
            measure("postgresql", args.postgres, args)
        else:
            with postgres_server() as url:
                measure("postgresql", url, args)


if __name__ == "__main__":
    main()
