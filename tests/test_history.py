"""The history store, on SQLite and on a real PostgreSQL server: what a run writes, what a later
run learns from it, what ``preflight history`` answers, and that a failing store never changes a
verdict. Nodes are the recorded H100 node's facts (tests/data/runs/h100_node.json) with serials
given to its GPUs, as nvidia-smi reports them."""

from __future__ import annotations

import copy
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from preflight.cli import main
from preflight.errors import ExitCode
from preflight.history.annotate import PAST_RUNS, SLOWER
from preflight.history.queries import Filters, flaky, latest_values, offenders, trends
from preflight.history.record import RunInfo
from preflight.history.schema import SCHEMA_VERSION
from preflight.history.session import HistoryRequest, remember
from preflight.history.settings import HistorySection, iso
from preflight.history.store import HistoryError, open_store
from preflight.model import CheckResult, HostReport, RunReport
from tests.lab.postgres import PostgresUnavailable
from tests.lab.postgres import postgres_server as lab_postgres

DATA = Path(__file__).parent / "data" / "runs"
H100 = json.loads((DATA / "h100_node.json").read_text())
INFO = RunInfo(inventory="hosts.txt", profile="standard", local=False)
PG_BIN = Path("/usr/lib/postgresql")


def _facts(serials: list[str]) -> dict[str, Any]:
    facts = copy.deepcopy(H100)
    for gpu, serial in zip(facts["gpus"], serials, strict=False):
        gpu["serial"] = serial
    return facts


def _host(name: str, serials: list[str]) -> HostReport:
    """A node reached as ``name`` that calls itself ``name``."""
    facts = {**_facts(serials), "hostname": name}
    return HostReport(name=name, address=name, hostname=name, reachable=True, facts=facts)


def _compute(ranks: list[tuple[str, str, float]], slow: tuple[str, ...] = ()) -> CheckResult:
    median = sorted(r[2] for r in ranks)[len(ranks) // 2]
    details = {
        "item": "slow_compute",
        "slow_ratio": 0.9,
        "ranks": [
            {"rank": i, "host": h, "gpu_serial": s, "flops_per_s": f * 1e12, "ratio": f / median}
            for i, (h, s, f) in enumerate(ranks)
        ],
    }
    status = "fail" if slow else "pass"
    return CheckResult("compute", status, "slow GPU" if slow else "compute rates alike", slow, details)


def _report(at: datetime, hosts: list[HostReport], results: list[CheckResult]) -> RunReport:
    return RunReport.build(
        tool_version="test", started_at=iso(at), duration_s=1.0, hosts=hosts, results=results
    )


# ----------------------------------------------------------------------------- the two backends


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _unavailable(reason: str) -> None:
    """Skip where PostgreSQL cannot run here; on CI, whose set-up (tests/run.sh) installs it, fail."""
    if os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no"):
        pytest.fail(f"{reason} (CI must run the PostgreSQL tests)", pytrace=False)
    pytest.skip(reason)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    """A PostgreSQL server for the session (tests/lab/postgres.py); its URL."""
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed (pip install '.[postgres]')")
    try:
        with lab_postgres() as url:
            yield url
    except PostgresUnavailable as exc:
        _unavailable(str(exc))


@pytest.fixture(params=["sqlite", "postgresql"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A fresh, empty store on each backend."""
    if request.param == "sqlite":
        return str(tmp_path / "history.sqlite")
    import psycopg

    server: str = request.getfixturevalue("postgres_server")
    name = f"t{time.monotonic_ns()}"
    with psycopg.connect(server, autocommit=True) as connection:
        connection.execute(f"CREATE DATABASE {name}")
    return server.rsplit("/", 1)[0] + f"/{name}"


def _remember(target: str, report: RunReport, **section: Any) -> RunReport:
    return remember(report, HistoryRequest(HistorySection(store=target, **section), INFO))


# ----------------------------------------------------------------------------- the tests

NOW = datetime(2026, 11, 20, 12, 0, tzinfo=UTC)
SERIALS = {"node1": ["S1-0", "S1-1"], "node2": ["S2-0", "S2-1"], "node3": ["S3-0", "S3-1"]}


def _hosts() -> list[HostReport]:
    return [_host(n, s) for n, s in SERIALS.items()]


def test_a_run_is_written_with_its_parts_and_rates(target: str) -> None:
    ranks = [(n, s, 600.0) for n, ss in SERIALS.items() for s in ss]
    out = _remember(target, _report(NOW, _hosts(), [_compute(ranks)]))
    assert [r.check for r in out.results] == ["compute"]  # nothing to warn of on a first run
    store = open_store(target)
    try:
        assert store.query("SELECT inventory, profile, verdict, hosts FROM runs") == [
            ("hosts.txt", "standard", "pass", 3)
        ]
        parts = store.query(
            "SELECT n.node, p.part, p.slot, p.pci FROM nodes n JOIN set_parts p ON p.digest = n.parts_digest"
            " WHERE p.kind = 'gpu' ORDER BY p.part"
        )
        assert parts[0] == ("node1", "S1-0", "0", "00000000:04:00.0")
        versions = json.loads(store.query("SELECT stack_versions FROM nodes WHERE node = 'node2'")[0][0])
        assert versions["driver"] == "550.54.15" and versions["nccl"] == "2.21.5"
        rates = trends(store, Filters(since=iso(NOW - timedelta(days=1)), part="S3-1"))
        assert [(t.node, t.runs, t.mean) for t in rates] == [("node3", 1, 600.0)]
    finally:
        store.close()


def test_a_gpu_that_fails_on_two_nodes_follows_the_gpu(target: str) -> None:
    # GPU S1-1 is slow in node1, is moved to node3 and is slow there: the part is the culprit.
    first = [(n, s, 600.0 if s != "S1-1" else 400.0) for n, ss in SERIALS.items() for s in ss]
    _remember(target, _report(NOW - timedelta(days=2), _hosts(), [_compute(first, ("node1",))]))
    moved = {"node1": ["S1-0", "S9-9"], "node2": SERIALS["node2"], "node3": ["S3-0", "S1-1"]}
    hosts = [_host(n, s) for n, s in moved.items()]
    second = [(n, s, 600.0 if s != "S1-1" else 400.0) for n, ss in moved.items() for s in ss]
    out = _remember(target, _report(NOW, hosts, [_compute(second, ("node3",))]))
    finding = out.results[0]
    assert finding.summary.endswith("(2nd time in 30 days: on node1, then node3)")
    assert finding.details["history"]["before"][0]["node"] == "node1"
    assert out.exit_code == ExitCode.CHECK_FAILED  # the verdict is the check's
    store = open_store(target)
    try:
        found = offenders(store, Filters(since=iso(NOW - timedelta(days=30))))
    finally:
        store.close()
    assert [(o.by, o.name, o.others) for o in found] == [("part", "S1-1", ["node1", "node3"])]


def test_a_node_that_fails_with_different_gpus_points_at_the_node(target: str) -> None:
    for day, serials in enumerate((["A-0", "A-1"], ["B-0", "B-1"])):
        hosts = [_host("node1", serials), _host("node2", SERIALS["node2"])]
        ranks = [("node1", serials[1], 400.0), ("node1", serials[0], 600.0), ("node2", "S2-0", 600.0)]
        ranks.append(("node2", "S2-1", 600.0))
        _remember(target, _report(NOW - timedelta(days=5 - day), hosts, [_compute(ranks, ("node1",))]))
    store = open_store(target)
    try:
        found = offenders(store, Filters(since=iso(NOW - timedelta(days=30))))
    finally:
        store.close()
    assert [(o.by, o.name, o.others) for o in found] == [("node", "node1", ["A-1", "B-1"])]


def test_a_finding_that_comes_and_goes_is_flaky_and_a_steady_one_is_not(target: str) -> None:
    def run(day: int, failing: tuple[str, ...]) -> None:
        results = [CheckResult("limits", "fail", "shm small", failing, {"item": "shm"})] if failing else []
        _remember(target, _report(NOW - timedelta(days=10 - day), _hosts(), results))

    for day, failing in enumerate([("node1", "node2"), ("node2",), ("node1", "node2")]):
        run(day, failing)
    store = open_store(target)
    try:
        found = flaky(store, Filters(since=iso(NOW - timedelta(days=30))))
    finally:
        store.close()
    assert [(f.key, f.failed, f.checked) for f in found] == [("limits/node1/shm", 2, 3)]


def test_a_gpu_slower_than_its_own_past_is_named_though_its_peers_are_alike(target: str) -> None:
    for day in range(4):
        ranks = [(n, s, 600.0 + day) for n, ss in SERIALS.items() for s in ss]
        _remember(target, _report(NOW - timedelta(days=8 - day), _hosts(), [_compute(ranks)]))
    # Every GPU 20 % slower after, say, a driver change: the peers agree, their own past does not.
    ranks = [(n, s, 480.0) for n, ss in SERIALS.items() for s in ss]
    out = _remember(target, _report(NOW, _hosts(), [_compute(ranks)]))
    slower = [r for r in out.results if r.details.get("item") == SLOWER]
    assert len(slower) == 6 and all(r.status == "warn" for r in slower)
    assert "node1 GPU 0 (S1-0): compute rate 480.0 TFLOPS, 20% below its own median" in slower[0].summary
    assert out.exit_code == ExitCode.OK
    # Within the margin, nothing is said.
    steady = [(n, s, 590.0) for n, ss in SERIALS.items() for s in ss]
    later = _remember(target, _report(NOW + timedelta(hours=1), _hosts(), [_compute(steady)]))
    assert [r.details.get("item") for r in later.results] == ["slow_compute"]


def test_a_rate_that_moves_that_much_run_to_run_is_not_named_for_moving(target: str) -> None:
    """CPU ranks of a shared machine (the lab's) move by a quarter from run to run: a run 12% below
    their median is within their own spread, not a slowdown. Seen on the healthy lab before: a node's
    busbw 12% below its median of 16 runs was named."""
    for day, rate in enumerate([0.70, 0.52, 0.88, 0.61, 0.79, 0.66]):
        ranks = [(n, s, rate * 1000) for n, ss in SERIALS.items() for s in ss]
        _remember(target, _report(NOW - timedelta(days=8 - day), _hosts(), [_compute(ranks)]))
    ranks = [(n, s, 0.61 * 1000) for n, ss in SERIALS.items() for s in ss]
    out = _remember(target, _report(NOW, _hosts(), [_compute(ranks)]))
    assert not [r for r in out.results if r.details.get("item") == SLOWER]


def test_a_few_runs_that_happened_to_agree_do_not_make_a_usual_dip_a_slowdown(target: str) -> None:
    """Seen on the healthy lab: a node's busbw 10% below its median of four runs that had agreed
    within a few percent was named, though the lab's rates move by a quarter run to run. The spread
    of four runs is barely known; a past of 28 runs that agreed as closely names the same dip
    (13% below here)."""
    past = [0.84, 0.80, 0.79, 0.81]
    for day, rate in enumerate(past):
        ranks = [(n, s, rate * 1000) for n, ss in SERIALS.items() for s in ss]
        _remember(target, _report(NOW - timedelta(days=20 - day), _hosts(), [_compute(ranks)]))
    dip = [(n, s, 0.70 * 1000) for n, ss in SERIALS.items() for s in ss]
    out = _remember(target, _report(NOW - timedelta(days=10), _hosts(), [_compute(dip)]))
    assert not [r for r in out.results if r.details.get("item") == SLOWER]
    for day, rate in enumerate(past * 6):
        ranks = [(n, s, rate * 1000) for n, ss in SERIALS.items() for s in ss]
        _remember(target, _report(NOW - timedelta(days=9, hours=-day), _hosts(), [_compute(ranks)]))
    out = _remember(target, _report(NOW, _hosts(), [_compute(dip)]))
    assert len([r for r in out.results if r.details.get("item") == SLOWER]) == 6


def test_a_rates_own_past_is_its_last_runs_so_a_lasting_change_becomes_its_normal(target: str) -> None:
    """Its own past is a rate's last PAST_RUNS runs in the window, not all of them: every GPU steady
    at 600 TFLOPS for 40 runs, then at 500 (after a driver change, say). Its 500s are named slower
    than its own past while the 600s are most of its last 30 runs, and no longer once the 500s are
    (read over the whole window, they would be named until they outnumbered the window's 40 runs at
    600: 41 runs, 7 days at a run every 4 hours)."""

    def run(at: datetime, rate: float) -> RunReport:
        ranks = [(n, s, rate) for n, ss in SERIALS.items() for s in ss]
        return _remember(target, _report(at, _hosts(), [_compute(ranks)]))

    start = NOW - timedelta(days=20)
    for number in range(40):
        run(start + timedelta(hours=4 * number), 600.0 + number % 3)
    named = []
    for number in range(40, 60):
        out = run(start + timedelta(hours=4 * number), 500.0)
        named.append(len([r for r in out.results if r.details.get("item") == SLOWER]))
    # The 41st to the 55th run find most of their last 30 at 600: all six GPUs named each time.
    half = PAST_RUNS // 2
    assert named[:half] == [6] * half
    # From the 56th, 15 or more of the last 30 runs were at 500: its median has moved.
    assert named[half:] == [0] * (20 - half)


def test_two_runs_writing_at_once_both_land(target: str) -> None:
    code = (
        "import sys; from datetime import datetime, UTC; import tests.test_history as t\n"
        "t._remember(sys.argv[1], t._report(datetime.now(UTC), t._hosts(), []))\n"
    )
    path = os.pathsep.join([str(Path(__file__).parent.parent), os.environ.get("PYTHONPATH", "")])
    env = {**os.environ, "PYTHONPATH": path}
    writers = [subprocess.Popen([sys.executable, "-c", code, target], env=env) for _ in range(2)]
    assert [w.wait(timeout=60) for w in writers] == [0, 0]
    store = open_store(target)
    try:
        assert store.query("SELECT COUNT(*) FROM runs") == [(2,)]
        # Both runs name each node's parts: 3 nodes of 4 GPUs, written once.
        assert store.query("SELECT COUNT(*) FROM nodes WHERE parts_digest IS NOT NULL") == [(2 * 3,)]
        assert store.query("SELECT COUNT(*) FROM part_sets") == [(3,)]
        assert store.query("SELECT COUNT(*) FROM set_parts") == [(3 * 4,)]
    finally:
        store.close()


def _parts_of_runs(target: str) -> list[tuple[str, str, str]]:
    """(run's time, node, GPU serial) of every GPU each run saw, as ``--local`` reads them back."""
    store = open_store(target)
    try:
        rows = store.query(
            "SELECT r.started_at, n.node, p.part FROM runs r JOIN nodes n ON n.run_id = r.id"
            " JOIN set_parts p ON p.digest = n.parts_digest WHERE p.kind = 'gpu'"
            " ORDER BY r.started_at, n.node, p.part"
        )
    finally:
        store.close()
    return [(str(at), str(node), str(part)) for at, node, part in rows]


def test_a_nodes_parts_are_written_once_while_they_stay_the_same(target: str) -> None:
    for day in range(3):
        _remember(target, _report(NOW - timedelta(days=3 - day), _hosts(), []))
    swapped = [_host("node1", ["S9-0", "S1-1"]), *_hosts()[1:]]
    _remember(target, _report(NOW, swapped, []))
    store = open_store(target)
    try:
        # Three nodes' sets, and node1's again with its swapped GPU: 4 GPUs each.
        assert store.query("SELECT node, COUNT(*) FROM part_sets GROUP BY node ORDER BY node") == [
            ("node1", 2),
            ("node2", 1),
            ("node3", 1),
        ]
        assert store.query("SELECT COUNT(*) FROM set_parts WHERE kind = 'gpu'") == [(4 * 4,)]
    finally:
        store.close()
    # Each run still reads back the parts it saw.
    seen = _parts_of_runs(target)
    assert [(node, part) for at, node, part in seen if at == iso(NOW) and node == "node1"][:2] == [
        ("node1", "S1-1"),
        ("node1", "S9-0"),
    ]
    assert [(node, part) for at, node, part in seen if at == iso(NOW - timedelta(days=1))][:2] == [
        ("node1", "S1-0"),
        ("node1", "S1-1"),
    ]


def test_keep_forgets_old_runs(target: str) -> None:
    _remember(target, _report(datetime.now(UTC) - timedelta(days=100), _hosts(), []))
    old_node1 = [_host("node1", ["S9-0", "S9-1"]), *_hosts()[1:]]
    _remember(target, _report(datetime.now(UTC) - timedelta(days=95), old_node1, []))
    _remember(target, _report(datetime.now(UTC), _hosts(), []), keep="90d")
    store = open_store(target)
    try:
        assert store.query("SELECT COUNT(*) FROM runs") == [(1,)]
        assert store.query("SELECT COUNT(*) FROM nodes") == [(3,)]
        # node1's set of S9 GPUs went with the runs that named it; the others stay for the last run.
        assert store.query("SELECT COUNT(*) FROM part_sets") == [(3,)]
        assert store.query("SELECT COUNT(*) FROM set_parts WHERE part IN ('S9-0', 'S9-1')") == [(0,)]
    finally:
        store.close()
    assert len(_parts_of_runs(target)) == 3 * 4


# ----------------------------------------------------------------------------- a store that fails


def test_a_corrupt_store_is_a_warning_and_the_verdict_stands(tmp_path: Path) -> None:
    corrupt = tmp_path / "history.sqlite"
    corrupt.write_bytes(b"not a database, just bytes" * 100)
    report = _report(NOW, _hosts(), [CheckResult("limits", "fail", "shm small", ("node1",), {"item": "shm"})])
    out = _remember(str(corrupt), report)
    assert out.exit_code == report.exit_code == ExitCode.CHECK_FAILED
    assert out.results[:1] == report.results
    warning = out.results[-1]
    assert (warning.check, warning.status) == ("history", "warn")
    assert "not in the history" in warning.summary and str(corrupt) in warning.summary


def test_an_unwritable_store_is_a_warning(tmp_path: Path) -> None:
    blocked = tmp_path / "file"
    blocked.write_text("")
    out = _remember(str(blocked / "history.sqlite"), _report(NOW, _hosts(), []))
    assert out.exit_code == ExitCode.OK
    assert [(r.check, r.status) for r in out.results] == [("history", "warn")]


def test_a_locked_store_is_a_warning_after_the_busy_timeout(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import preflight.history.store as store_module

    path = tmp_path / "history.sqlite"
    open_store(str(path)).close()
    monkeypatch.setattr(store_module, "BUSY_TIMEOUT_S", 0.2)
    import sqlite3

    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        out = _remember(str(path), _report(NOW, _hosts(), []))
    finally:
        holder.execute("ROLLBACK")
        holder.close()
    assert [(r.check, r.status) for r in out.results] == [("history", "warn")]
    assert "locked" in out.results[0].summary


def test_a_store_from_a_newer_preflight_is_left_alone(tmp_path: Path) -> None:
    path = str(tmp_path / "history.sqlite")
    store = open_store(path)
    store.execute("UPDATE meta SET value = '99' WHERE key = 'schema_version'")
    store.close()
    with pytest.raises(HistoryError, match="schema version 99 is newer"):
        open_store(path)


def test_a_store_of_the_first_schema_is_migrated_and_keeps_its_runs(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    ranks = [(n, s, 600.0) for n, ss in SERIALS.items() for s in ss]
    with monkeypatch.context() as old:
        _as_before_version_4(old, 1)
        _remember(target, _report(NOW - timedelta(days=1), _hosts(), [_compute(ranks)]))
        store = open_store(target)
        assert store.schema_version() == 1
        store.close()
    _remember(target, _report(NOW, _hosts(), [_compute(ranks)]))
    store = open_store(target)
    try:
        assert store.schema_version() == SCHEMA_VERSION
        rates = trends(store, Filters(since=iso(NOW - timedelta(days=2)), part="S1-0"))
        assert [(t.node, t.runs) for t in rates] == [("node1", 2)]
    finally:
        store.close()


def test_a_store_of_the_second_schema_keeps_each_runs_parts(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Two runs of version 2, each with its own rows of parts; node1's GPU 0 swapped between them.
    with monkeypatch.context() as old:
        _as_before_version_4(old, 2)
        _remember(target, _report(NOW - timedelta(days=2), _hosts(), []))
        swapped = [_host("node1", ["S9-0", "S1-1"]), *_hosts()[1:]]
        _remember(target, _report(NOW - timedelta(days=1), swapped, []))
        before = _parts_of_version_2(target)
    assert len(before) == 2 * 3 * 4
    assert {part for at, node, part in before if node == "node1"} >= {"S1-0", "S9-0"}
    _remember(target, _report(NOW, _hosts(), []))
    store = open_store(target)
    try:
        assert store.schema_version() == SCHEMA_VERSION
    finally:
        store.close()
    seen = _parts_of_runs(target)
    assert [row for row in seen if row[0] < iso(NOW)] == before
    first = iso(NOW - timedelta(days=2))
    assert [row[1:] for row in seen if row[0] == iso(NOW)] == [row[1:] for row in before if row[0] == first]


def _as_before_version_4(patch: pytest.MonkeyPatch, version: int) -> None:
    """A run writes as a preflight of schema ``version`` did: nodes by the names that reached them."""
    patch.setattr("preflight.history.store.SCHEMA_VERSION", version)
    patch.setattr("preflight.history.session.save", _save_before_version_3)
    patch.setattr("preflight.history.session._known_identities", lambda store, record: {})
    patch.setattr("preflight.history.session.adopt_legacy_names", lambda store, reached: [])


def _save_before_version_3(store: Any, record: Any) -> int:
    """A run as versions 1 and 2 wrote it: its nodes, each node's parts in ``parts``, its rates."""
    with store.transaction():
        run_id = store.insert_returning_id(
            "INSERT INTO runs (started_at, inventory, profile, verdict, tool_version, local, hosts)"
            " VALUES (?, 'hosts.txt', 'standard', 'pass', 'test', 0, ?) RETURNING id",
            (record.started_at, len(record.hosts)),
        )
        store.insert_many(
            "nodes",
            ("run_id", "node", "reachable", "stack_versions"),
            [(run_id, h.name, 1, "{}") for h in record.hosts],
        )
        store.insert_many(
            "parts",
            ("run_id", "node", "kind", "part", "slot", "uuid", "pci", "rate"),
            [
                (run_id, p.node, p.kind, p.part, p.slot, p.uuid, p.pci, p.rate)
                for ps in record.parts.values()
                for p in ps
            ],
        )
        store.insert_many(
            "rates",
            ("run_id", "started_at", "metric", "node", "part", "value"),
            [(run_id, record.started_at, r.metric, r.node, r.part, r.value) for r in record.rates],
        )
    return run_id


def _parts_of_version_2(target: str) -> list[tuple[str, str, str]]:
    store = open_store(target)
    try:
        rows = store.query(
            "SELECT r.started_at, p.node, p.part FROM runs r JOIN parts p ON p.run_id = r.id"
            " WHERE p.kind = 'gpu' ORDER BY r.started_at, p.node, p.part"
        )
    finally:
        store.close()
    return [(str(at), str(node), str(part)) for at, node, part in rows]


# ----------------------------------------------------------------------------- pairs and the report's key


def _allreduce(pairs: list[tuple[str, str, float, bool]]) -> CheckResult:
    """An all-reduce finding with pair tests as the judge writes them: (node, node, busbw, retest)."""
    tests = [
        {"round": i, "nodes": [a, b], "busbw_gbps": busbw, "retest": retest}
        for i, (a, b, busbw, retest) in enumerate(pairs)
    ]
    return CheckResult("allreduce", "pass", "all-reduce fine", (), {"pairs": tests})


def test_each_pair_keeps_its_fastest_test_under_its_sorted_names(target: str) -> None:
    # node3-node1 was slow once and fast when re-tested; node2-node3 was slow in both tests.
    pairs = [
        ("node1", "node2", 380.0, False),
        ("node3", "node1", 120.0, False),
        ("node2", "node3", 150.0, False),
        ("node1", "node3", 375.0, True),
        ("node3", "node2", 140.0, True),
    ]
    _remember(target, _report(NOW, _hosts(), [_allreduce(pairs)]))
    store = open_store(target)
    try:
        rows = store.query(
            "SELECT node, part, value FROM rates WHERE metric = 'pair_busbw' ORDER BY node, part"
        )
        assert rows == [("node1", "node2", 380.0), ("node1", "node3", 375.0), ("node2", "node3", 150.0)]
        # A node's busbw stays the median of its first tests.
        assert store.query("SELECT value FROM rates WHERE metric = 'busbw' AND node = 'node3'") == [(135.0,)]
        # --node names a pair by either of its nodes.
        of_node3 = trends(store, Filters(since=iso(NOW - timedelta(days=1)), node="node3"))
        assert [(t.metric, t.node, t.part) for t in of_node3] == [
            ("busbw", "node3", ""),
            ("pair_busbw", "node1", "node3"),
            ("pair_busbw", "node2", "node3"),
        ]
    finally:
        store.close()


def test_preflight_history_leaves_the_pairs_out_unless_asked(
    target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    pairs = [("node1", "node2", 380.0, False), ("node2", "node3", 370.0, False)]
    _remember(target, _report(NOW, _hosts(), [_allreduce(pairs)]))

    def answer(*options: str) -> dict[str, Any]:
        since = iso(NOW - timedelta(days=1))
        assert main(["history", "--history", target, "--json", "--since", since, *options]) == 0
        found: dict[str, Any] = json.loads(capsys.readouterr().out)
        return found

    def shown(found: dict[str, Any]) -> list[tuple[str, str, str]]:
        return [(t["metric"], t["node"], t["part"]) for t in found["trends"]]

    plain = answer()
    assert plain["pairs_left_out"] is True
    assert shown(plain) == [("busbw", "node1", ""), ("busbw", "node2", ""), ("busbw", "node3", "")]
    every = answer("--pairs")
    assert every["pairs_left_out"] is False
    assert shown(every)[1:3] == [("busbw", "node2", ""), ("busbw", "node3", "")]
    assert ("pair_busbw", "node1", "node2") in shown(every) and ("pair_busbw", "node2", "node3") in shown(
        every
    )
    of_node3 = answer("--node", "node3")
    assert of_node3["pairs_left_out"] is False
    assert shown(of_node3) == [("busbw", "node3", ""), ("pair_busbw", "node2", "node3")]
    # In the terminal, a line says what was left out.
    assert main(["history", "--history", target, "--since", iso(NOW - timedelta(days=1))]) == 0
    assert "pairs' trends left out" in capsys.readouterr().out


def test_the_report_carries_what_the_store_says_about_the_runs_own_nodes(target: str) -> None:
    # node4 ran with the others before: its rates, its pairs and its failures are not this run's.
    everyone = {**SERIALS, "node4": ["S4-0", "S4-1"]}
    pairs = [
        ("node1", "node2", 380.0, False),
        ("node2", "node3", 370.0, False),
        ("node3", "node4", 360.0, False),
    ]
    for day, serials in enumerate((["A-0", "S1-1"], ["B-0", "S1-1"], SERIALS["node1"])):
        hosts = [_host(n, serials if n == "node1" else s) for n, s in everyone.items()]
        ranks = [(h.name, g.serial or "", 600.0 + day) for h in hosts for g in h.node.gpus or []]
        slow = ("node1", "node4") if day < 2 else ()
        slow_gpus = ("A-0", "B-0", f"S4-{day}")  # node4 too fails with two GPUs
        compute = _compute([(n, s, 400.0 if s in slow_gpus else f) for n, s, f in ranks], slow)
        _remember(target, _report(NOW - timedelta(days=3 - day), hosts, [compute, _allreduce(pairs)]))
    # This run: three nodes; node1 holds S1-0 and S1-1 again.
    ranks = [(n, s, 590.0) for n, ss in SERIALS.items() for s in ss]
    out = _remember(target, _report(NOW, _hosts(), [_compute(ranks), _allreduce(pairs[:2])]))
    history = out.to_dict()["history"]
    since = iso(NOW - timedelta(days=30))
    assert (history["since"], history["window_days"]) == (since, 30)
    # node1 and node4 failed with two different GPUs each; node4 is not in this run.
    assert [(o["by"], o["name"], o["others"]) for o in history["offenders"]] == [
        ("node", "node1", ["A-0", "B-0"])
    ]
    # The same answers as preflight history, for this run's nodes and parts and the pairs among them.
    store = open_store(target)
    try:
        assert history["store"] == store.target
        assert {o.name for o in offenders(store, Filters(since=since))} == {"node1", "node4"}
        everything = trends(store, Filters(since=since, pairs=True))
        # A trend's values are its latest only; its figures stay the window's.
        assert latest_values(store, since, [("tflops", "node2", "S2-0")], 2) == {
            ("tflops", "node2", "S2-0"): [602.0, 590.0]
        }
    finally:
        store.close()
    parts = {s for ss in SERIALS.values() for s in ss}
    expected = [
        t.to_dict()
        for t in everything
        if t.node in SERIALS
        and (t.metric != "tflops" or t.part in parts)
        and (t.metric != "pair_busbw" or (t.node, t.part) in {("node1", "node2"), ("node2", "node3")})
    ]
    got = [{k: v for k, v in t.items() if k not in ("now", "values")} for t in history["trends"]]
    assert got == [{**e, "mean": pytest.approx(e["mean"])} for e in expected]
    by_key = {(t["metric"], t["node"], t["part"]): t for t in history["trends"]}
    assert by_key[("tflops", "node2", "S2-0")]["values"] == [600.0, 601.0, 602.0, 590.0]
    assert by_key[("tflops", "node2", "S2-0")]["now"] == 590.0
    assert by_key[("tflops", "node1", "S1-0")]["runs"] == 2  # in node1 once before, and now
    assert by_key[("pair_busbw", "node2", "node3")]["values"][-1] == 370.0
    assert ("pair_busbw", "node3", "node4") not in by_key and ("busbw", "node4", "") not in by_key
    # The key survives the JSON report, for preflight report to render again.
    assert RunReport.from_dict(json.loads(json.dumps(out.to_dict()))).history == history


def test_a_finding_that_comes_and_goes_on_a_runs_node_is_in_its_report(target: str) -> None:
    for day, failing in enumerate([("node1", "node2"), ("node2",), ("node1", "node2")]):
        results = [CheckResult("limits", "fail", "shm small", failing, {"item": "shm"})]
        out = _remember(target, _report(NOW - timedelta(days=10 - day), _hosts(), results))
    assert out.history is not None
    assert out.history["flaky"] == [{"key": "limits/node1/shm", "node": "node1", "failed": 2, "checked": 3}]
    only_node2 = _remember(target, _report(NOW, [_host("node2", SERIALS["node2"])], []))
    assert only_node2.history is not None and only_node2.history["flaky"] == []


def test_a_run_without_the_store_has_no_history_key(tmp_path: Path) -> None:
    path = tmp_path / "history.sqlite"
    out = _remember(str(path), _report(NOW, _hosts(), []), enabled=False)
    assert out.history is None and "history" not in out.to_dict()
    assert not path.exists()
    # A store that cannot be read leaves a warning and no key.
    broken = tmp_path / "broken.sqlite"
    broken.write_bytes(b"not a database" * 100)
    out = _remember(str(broken), _report(NOW, _hosts(), []))
    assert out.history is None and [r.check for r in out.results] == ["history"]


def test_a_large_runs_key_carries_values_only_for_the_rates_its_report_draws(target: str) -> None:
    from reports.html.history import history_view

    # 12 nodes of 4 GPUs and a ring of pairs: 12 + 48 + 12 rates, more than a report draws.
    names = [f"node{i:02d}" for i in range(12)]
    hosts = [_host(n, [f"{n}-{g}" for g in range(4)]) for n in names]
    ring = [(names[i], names[(i + 1) % 12]) for i in range(12)]
    for day in range(3):
        last = day == 2
        ranks = [
            (n, f"{n}-{g}", 450.0 if last and (n, g) == ("node05", 2) else 600.0 + day)
            for n in names
            for g in range(4)
        ]
        pairs = [(a, b, 300.0 if last and a == "node07" else 380.0, False) for a, b in ring]
        out = _remember(
            target, _report(NOW - timedelta(days=2 - day), hosts, [_compute(ranks), _allreduce(pairs)])
        )
    assert out.history is not None
    trends = out.history["trends"]
    assert len(trends) == 12 + 48 + 12
    assert all({"metric", "node", "part", "runs", "mean", "now"} <= set(t) for t in trends)
    with_values = {(t["metric"], t["node"], t["part"]): t for t in trends if "values" in t}
    # The slow GPU and the slow pair are drawn with their latest values and whole trend.
    slow_gpu = with_values[("tflops", "node05", "node05-2")]
    assert (slow_gpu["values"], slow_gpu["low"], slow_gpu["runs"]) == ([600.0, 601.0, 450.0], 450.0, 3)
    assert with_values[("pair_busbw", "node07", "node08")]["values"] == [380.0, 380.0, 300.0]
    # A GPU at its mean is not drawn: its runs, mean and this run's value only.
    (steady,) = [t for t in trends if t["part"] == "node01-1"]
    assert steady == {
        "metric": "tflops",
        "node": "node01",
        "part": "node01-1",
        "runs": 3,
        "mean": 601.0,
        "now": 602.0,
    }
    # What the key carries values for is what the HTML report draws.
    view = history_view(out)
    assert view is not None and 0 < len(view.drawn) == len(with_values) <= 40
    assert view.trends == len(trends) and len(view.nodes) == 12


def test_a_rate_far_below_a_noisy_past_is_named_and_the_noise_itself_is_not() -> None:
    """Two lab nodes' bus bandwidth (GB/s) over ten runs on a busy machine (a full test run beside
    them), as the store kept it: moving by tens of percent. A link throttled to a tenth is below
    their bound; the slowest of those runs is not."""
    from preflight.history.annotate import lower_bound

    past = [0.709, 0.813, 0.738, 0.853, 0.929, 0.764, 0.974, 0.856, 0.726, 1.002]
    bound = lower_bound(past)
    assert 0.11 < bound < min(past)
    assert lower_bound([600.0 + i for i in range(10)]) > 570  # a steady GPU's rate: a tight bound
