"""The rates the inside-the-node and DDP phases measure reach the history store and Prometheus as
the all-reduce's and the burn's do: each node's bus bandwidth among its own GPUs and each node's
DDP compute step, read from recorded runs (tests/data/jobs/SOURCES.md, tests/data/reports/SOURCES.md)."""

from __future__ import annotations

import pytest

from checks.ddp.measures import NODE_STEP
from checks.intranode.judge import judge_intranode
from checks.intranode.measures import INSIDE_BUSBW
from preflight.config import Config
from preflight.registry import kept_measures, measures_of
from reports import prometheus
from tests.test_allreduce import load_job
from tests.test_handback import recorded, samples


def test_each_node_s_busbw_inside_itself_is_a_kept_rate_and_a_gauge() -> None:
    (first, *_) = judge_intranode(load_job("intranode_two_ranks"), Config())
    by_node = {s.node: s.value for s in INSIDE_BUSBW.read(first)}
    assert by_node == pytest.approx(first.details["node_busbw_gbps"])
    assert set(by_node) == {"node1", "node2", "node3"}
    assert INSIDE_BUSBW in measures_of("intranode")
    assert "inside_busbw" in kept_measures()


def test_each_node_s_ddp_step_is_its_slowest_rank_s_and_is_published() -> None:
    report = recorded("slow_node")
    (ddp,) = [r for r in report.results if r.check == "ddp" and r.details.get("ranks")]
    steps = {row["host"]: row["compute_step_s"] for row in ddp.details["ranks"]}
    assert {s.node: s.value for s in NODE_STEP.read(ddp)} == pytest.approx(steps)
    assert "ddp_step_s" in kept_measures()
    found = samples(prometheus.render(report))
    for host, step in steps.items():
        assert found[f'preflight_ddp_step_seconds{{check="ddp",node="{host}"}}'] == pytest.approx(step)
