"""One node, one identity in the history store, on SQLite and on PostgreSQL: the names that reach a
node (an address, an ssh_config alias, ``--local``'s own name, Slurm's node name) are aliases of
what the node is; a store written before identities is joined where its parts show one node; the
runs kept are listed; findings read in words.

Nodes are the recorded H100 node's facts (tests/data/runs/h100_node.json) with serials given to
its GPUs and the host name each node reports."""

from __future__ import annotations

import io
import json
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from preflight.cli import main
from preflight.history.local import GPU_SWAPPED
from preflight.history.record import RunInfo
from preflight.history.session import IDENTITY_CLASH, HistoryRequest, remember
from preflight.history.settings import HistorySection, iso
from preflight.history.store import open_store
from preflight.history.write import _write_part_sets, digest_of
from preflight.identity import INVENTORY, Identity
from preflight.model import CheckResult, HostReport, RunReport
from reports.html.page import render
from reports.terminal import print_report
from tests.test_history import NOW, _as_before_version_4, _facts, _report

# The stores on both backends: test_history's fixtures (a SQLite file, a PostgreSQL database).
pytest_plugins = ["tests.test_history"]

FULL = RunInfo(inventory="hosts.txt", profile="standard", local=False)
LOCAL = RunInfo(inventory="(local)", profile="quick", local=True)
NODE3 = ["1654922006513", "1654922006514", "1654922006515", "1654922006516"]
NODE2 = ["1654922007001", "1654922007002", "1654922007003", "1654922007004"]


def _node(name: str, hostname: str, serials: list[str], reachable: bool = True) -> HostReport:
    """A node reached as ``name`` that calls itself ``hostname``."""
    facts = {**_facts(serials), "hostname": hostname} if reachable else {}
    return HostReport(name=name, address=name, hostname=hostname, reachable=reachable, facts=facts)


def _remember(target: str, report: RunReport, info: RunInfo = FULL) -> RunReport:
    return remember(report, HistoryRequest(HistorySection(store=target), info))


def _limits(*hosts: str) -> CheckResult:
    return CheckResult("limits", "fail", "shm small", hosts, {"item": "shm_small"})


def _rows(target: str, sql: str) -> list[tuple[Any, ...]]:
    store = open_store(target)
    try:
        return store.query(sql)
    finally:
        store.close()


def test_one_node_reached_four_ways_is_one_node(target: str) -> None:
    """By its address (a hosts file), by an ssh_config alias, through the local transport
    (``--local``: Slurm's node name, or the short host name) and through srun (Slurm's node name,
    which differs from the host name here): one node, its findings counted together."""
    reached = [
        ("10.77.0.13", FULL),
        ("gpu3", FULL),  # Host gpu3 / HostName 10.77.0.13 in ~/.ssh/config
        ("pfnode3", LOCAL),
        ("sl-n03", FULL),  # srun's node name
    ]
    for day, (name, info) in enumerate(reached):
        at = NOW - timedelta(days=len(reached) - day)
        out = _remember(
            target, _report(at, [_node(name, "PFNODE3.cluster.local", NODE3)], [_limits(name)]), info
        )
    assert out.results[0].summary.endswith("(4th time in 30 days: on pfnode3)")
    assert out.history is not None
    assert out.history["identities"] == [{"name": "sl-n03", "node": "pfnode3", "source": "hostname"}]
    assert _rows(target, "SELECT DISTINCT node FROM nodes") == [("pfnode3",)]
    assert _rows(target, "SELECT DISTINCT node FROM findings") == [("pfnode3",)]
    assert sorted(_rows(target, "SELECT reached_as FROM nodes")) == sorted((n,) for n, _ in reached)
    # The node's parts were written once: the same set under one identity.
    assert _rows(target, "SELECT COUNT(*) FROM part_sets") == [(1,)]


def test_the_reports_show_the_identity_a_node_is_kept_under_beside_the_name_that_reached_it(
    target: str,
) -> None:
    _remember(target, _report(NOW - timedelta(days=1), [_node("10.77.0.13", "pfnode3", NODE3)], []))
    out = _remember(target, _report(NOW, [_node("sl-n03", "pfnode3", NODE3)], [_limits("sl-n03")]))
    console = Console(file=io.StringIO(), width=200, color_system=None)
    print_report(out, console)
    terminal = console.file.getvalue()  # type: ignore[attr-defined]
    assert "history keeps sl-n03 as pfnode3 (by hostname)" in terminal
    page = render(out)
    kept = re.search(r'<table class="data history-kept-as-table">.*?</table>', page, re.S)
    assert kept is not None
    assert re.findall(r"<tr><th[^>]*>(.*?)</th><td[^>]*>(.*?)</td><td>(.*?)</td></tr>", kept[0]) == [
        ("sl-n03", "pfnode3", "hostname")
    ]
    # A node reached by its own name: nothing to say.
    same = _remember(target, _report(NOW + timedelta(hours=1), [_node("pfnode3", "pfnode3", NODE3)], []))
    console = Console(file=io.StringIO(), width=200, color_system=None)
    print_report(same, console)
    assert "history keeps" not in console.file.getvalue()  # type: ignore[attr-defined]
    assert "history-kept-as" not in render(same).split("</style>")[-1]


def test_a_prolog_sees_the_gpu_replaced_since_the_full_run_that_reached_it_by_address(target: str) -> None:
    _remember(target, _report(NOW - timedelta(days=1), [_node("10.77.0.13", "pfnode3", NODE3)], []))
    replaced = [NODE3[0], "1654922009999", *NODE3[2:]]
    out = _remember(target, _report(NOW, [_node("pfnode3", "pfnode3", replaced)], []), LOCAL)
    (swapped,) = [r for r in out.results if r.details.get("item") == GPU_SWAPPED]
    assert swapped.hosts == ("pfnode3",)
    assert swapped.summary.startswith(
        "pfnode3: GPU 1 is 1654922009999, was 1654922006514 since its last full run"
    )


def test_a_node_not_reached_keeps_the_identity_it_was_last_reached_as(target: str) -> None:
    _remember(target, _report(NOW - timedelta(days=1), [_node("10.77.0.13", "pfnode3", NODE3)], []))
    unreached = _node("10.77.0.13", "", [], reachable=False)
    _remember(
        target, _report(NOW, [unreached], [CheckResult("connect", "error", "timed out", ("10.77.0.13",), {})])
    )
    assert _rows(target, "SELECT DISTINCT node FROM findings") == [("pfnode3",)]


def test_two_nodes_with_one_host_name_are_each_kept_under_their_own_names(target: str) -> None:
    """Two machines cloned from one image both call themselves pfnode: neither is the other, so
    each is kept under the name that reached it, and the run says so (its verdict stays)."""
    hosts = [_node("10.77.0.12", "pfnode", NODE2), _node("10.77.0.13", "pfnode", NODE3)]
    out = _remember(target, _report(NOW, hosts, []))
    (clash,) = [r for r in out.results if r.details.get("item") == IDENTITY_CLASH]
    assert clash.status == "warn" and clash.hosts == ("10.77.0.12", "10.77.0.13")
    assert "one hostname (pfnode)" in clash.summary and out.verdict == "pass"
    assert sorted(_rows(target, "SELECT node, identity_source FROM nodes")) == [
        ("10.77.0.12", "inventory"),
        ("10.77.0.13", "inventory"),
    ]


def _save_version_3(store: Any, record: Any) -> int:
    """A run as schema 3 wrote it: each node under the name that reached it, its part set named."""
    digests = {node: digest_of(node, parts) for node, parts in record.parts.items()}
    with store.transaction():
        _write_part_sets(store, digests, record.parts)
        run_id: int = store.insert_returning_id(
            "INSERT INTO runs (started_at, inventory, profile, verdict, tool_version, local, hosts)"
            " VALUES (?, 'hosts.txt', 'standard', ?, 'test', ?, ?) RETURNING id",
            (record.started_at, record.verdict, int(record.info.local), len(record.hosts)),
        )
        nodes = [(run_id, h.name, 1, "{}", digests[h.name]) for h in record.hosts]
        store.insert_many("nodes", ("run_id", "node", "reachable", "stack_versions", "parts_digest"), nodes)
        findings = [
            (
                run_id,
                record.started_at,
                f.key,
                f.check,
                f.entity,
                f.cause,
                f.status,
                f.node,
                f.part,
                f.summary,
            )
            for f in record.findings
        ]
        columns = ("run_id", "started_at", "finding_key", "check_name", "entity", "cause", "status", "node")
        store.insert_many("findings", (*columns, "part", "summary"), findings)
    return run_id


def _by_names(nodes: Any) -> tuple[dict[str, Identity], list[Any]]:
    """Schema 3 knew no identities: every node under the name that reached it."""
    return {n: Identity(n, INVENTORY, n) for n in nodes}, []


def test_a_store_that_holds_one_node_under_two_names_is_joined(
    target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Schema 3 kept node 3 as 10.77.0.13 (full runs) and as pfnode3 (its prolog); node 2 as
    10.77.0.12 only, and it once held one of node 3's GPUs. The migration joins node 3's names (they
    share every part and never met in one run), leaves node 2 as it is, and says so."""
    moved = [*NODE2[:3], NODE3[3]]
    with monkeypatch.context() as old:
        _as_before_version_4(old, 3)
        old.setattr("preflight.history.session.save", _save_version_3)
        old.setattr("preflight.history.record.identities", _by_names)
        hosts = [_node("10.77.0.12", "pfnode2", moved), _node("10.77.0.13", "pfnode3", NODE3)]
        _remember(target, _report(NOW - timedelta(days=3), hosts, [_limits("10.77.0.13")]))
        _remember(
            target,
            _report(NOW - timedelta(days=2), [_node("pfnode3", "pfnode3", NODE3)], [_limits("pfnode3")]),
        )
    store = open_store(target)  # migrated here
    try:
        assert sorted(store.query("SELECT DISTINCT node FROM nodes")) == [("10.77.0.12",), ("pfnode3",)]
        assert store.query("SELECT DISTINCT finding_key FROM findings") == [("limits/pfnode3/shm_small",)]
        names = {n: (node, how) for n, node, how in store.query("SELECT name, node, how FROM legacy_names")}
    finally:
        store.close()
    assert names["10.77.0.13"] == ("pfnode3", "joined with pfnode3: 4 parts in common")
    assert names["10.77.0.12"] == ("10.77.0.12", "left as it is: no other name shares its parts")
    # The first run after the upgrade reaches node 2 by the same address: its old rows join it.
    hosts = [_node("10.77.0.12", "pfnode2", NODE2), _node("10.77.0.13", "pfnode3", NODE3)]
    out = _remember(target, _report(NOW - timedelta(days=1), hosts, [_limits("10.77.0.13")]))
    assert out.results[0].summary.endswith("(3rd time in 30 days: on pfnode3)")
    assert sorted(_rows(target, "SELECT DISTINCT node FROM nodes")) == [("pfnode2",), ("pfnode3",)]
    assert ("10.77.0.12", "pfnode2") in _rows(target, "SELECT name, node FROM legacy_names")


def test_history_runs_lists_the_runs_kept_newest_first(
    target: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "250")
    report = tmp_path / "run.json"
    hosts = [_node("10.77.0.12", "pfnode2", NODE2), _node("10.77.0.13", "pfnode3", NODE3)]
    with_json = RunInfo(inventory="hosts.txt", profile="standard", local=False, report=str(report))
    _remember(target, _report(NOW - timedelta(days=2), hosts, [_limits("10.77.0.13")]), with_json)
    _remember(target, _report(NOW - timedelta(days=1), [_node("pfnode3", "pfnode3", NODE3)], []), LOCAL)
    _remember(target, _report(NOW, hosts[:1], []))

    def runs(*options: str) -> dict[str, Any]:
        since = iso(NOW - timedelta(days=3))
        assert main(["history", "--history", target, "--runs", "--json", "--since", since, *options]) == 0
        found: dict[str, Any] = json.loads(capsys.readouterr().out)
        return found

    every = runs()["runs"]
    assert [r["started_at"] for r in every] == [iso(NOW - timedelta(days=d)) for d in range(3)]
    oldest = every[-1]
    assert {k: oldest[k] for k in ("inventory", "profile", "verdict", "nodes_checked", "nodes_failed")} == {
        "inventory": "hosts.txt",
        "profile": "standard",
        "verdict": "fail",
        "nodes_checked": 2,
        "nodes_failed": 1,
    }
    assert oldest["report"] == str(report) and every[0]["report"] is None
    assert oldest["tool_version"] == "test" and every[1]["local"] is True
    # --node takes any name that reached the node: its address gives its runs.
    of_node3 = runs("--node", "10.77.0.13")
    assert of_node3["node"] == "pfnode3"
    assert [r["started_at"] for r in of_node3["runs"]] == [iso(NOW - timedelta(days=d)) for d in (1, 2)]
    # In the terminal: a table, the JSON report's path where one was written.
    assert main(["history", "--history", target, "--runs", "--since", iso(NOW - timedelta(days=3))]) == 0
    shown = capsys.readouterr().out
    assert "Runs kept" in shown and "not written" in shown and "run.json" in shown


def test_findings_read_in_words_in_the_history_tables(
    target: str, capsys: pytest.CaptureFixture[str]
) -> None:
    hosts = [_node("10.77.0.12", "pfnode2", NODE2), _node("10.77.0.13", "pfnode3", NODE3)]
    for day, failing in enumerate([("10.77.0.13",), (), ("10.77.0.13",)]):
        _remember(
            target, _report(NOW - timedelta(days=3 - day), hosts, [_limits(*failing)] if failing else [])
        )
    since = iso(NOW - timedelta(days=30))
    assert main(["history", "--history", target, "--since", since]) == 0
    shown = capsys.readouterr().out
    assert "limits/" not in shown
    assert "pfnode3" in shown and "shm small" in shown
    assert main(["history", "--history", target, "--since", since, "--json"]) == 0
    (flaky,) = json.loads(capsys.readouterr().out)["flaky"]
    assert (flaky["check"], flaky["node"], flaky["cause"]) == ("limits", "pfnode3", "shm_small")
    assert flaky["finding"] == "limits on pfnode3: shm small"
