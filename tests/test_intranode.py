"""The ``intranode`` check, judged on recorded jobs (tests/data/jobs/intranode_*.json) and variants
that change one thing; the network findings about a node slow inside itself refer to it."""

from __future__ import annotations

from typing import Any

from checks.allreduce.phase import PHASE as ALLREDUCE_PHASE
from checks.compute.root_cause import ITEM, refer_to_compute
from checks.intranode import judge_intranode
from checks.intranode.phase import PHASE as INTRANODE_PHASE
from checks.intranode.settings import IntranodeSection
from preflight.config import Config
from preflight.model import CheckResult
from tests.test_allreduce import failing, load_job, only, with_document

TWO_RANKS = load_job("intranode_two_ranks")
ONE_RANK = load_job("intranode_one_rank")
CONFIG = Config()


def slowed(node_rank: int, factor: float) -> Any:
    def change(document: dict[str, Any]) -> None:
        for record in document["intranode"]["ranks"]:
            if record["node_rank"] == node_rank:
                record["busbw_gbps"] *= factor
                record["time_s"] /= factor

    return with_document(TWO_RANKS, change)


def test_a_recorded_healthy_run_passes_with_every_nodes_busbw() -> None:
    result = only(judge_intranode(TWO_RANKS, CONFIG))
    assert result.status == "pass"
    assert result.summary.startswith("the all-reduce inside each of node[1-3] runs alike (node1 ")
    assert set(result.details["node_busbw_gbps"]) == {"node1", "node2", "node3"}


def test_one_process_per_node_is_skipped_with_the_reason() -> None:
    result = only(judge_intranode(ONE_RANK, CONFIG))
    assert (result.status, result.summary) == (
        "skip", "not measured: one process per node: no path inside a node to measure"
    )  # fmt: skip
    assert result.details["item"] == "phase_skipped"


def test_a_node_slow_inside_itself_is_named_with_its_ratio() -> None:
    (result,) = failing(judge_intranode(slowed(2, 0.05), CONFIG))
    assert result.hosts == ("node3",)
    assert result.details["item"] == "slow_inside_node" and result.details["ratio"] < 0.1
    assert result.summary.startswith(
        "node3 is slow inside itself: the all-reduce among its own ranks runs at 0.0"
    )
    assert result.details["slow_hosts"] == ["node3"]
    lenient = Config().with_sections(IntranodeSection(slow_ratio=0.01))
    assert only(judge_intranode(slowed(2, 0.05), lenient)).status == "pass"


def test_the_network_finding_about_that_node_refers_to_it() -> None:
    (cause,) = failing(judge_intranode(slowed(2, 0.05), CONFIG))
    network = CheckResult("allreduce", "fail", "node3 is slow with every partner", ("node3",), {"ratio": 0.1})
    (referred,) = refer_to_compute([network], [cause], ALLREDUCE_PHASE.speed_keys)
    assert referred.status == "warn" and referred.details["item"] == ITEM
    assert referred.details["refers_to"] == "intranode"
    assert "caused by node3 being slow inside itself at 0.0" in referred.summary
    assert "(see the intranode finding), not by the network" in referred.summary


def test_nvlinks_down_on_that_node_explain_its_inside_path() -> None:
    """intranode's own finding refers to hardware's NVLinks (what intranode's run passes), and says
    nothing of the network, which it never blamed."""
    (slow,) = failing(judge_intranode(slowed(2, 0.05), CONFIG))
    item = {"item": "gpu_nvlink"}
    links = CheckResult("hardware", "fail", "node3: GPU 1 NVLink 4 inactive", ("node3",), item)
    (referred,) = [
        r
        for r in refer_to_compute([slow], [links], INTRANODE_PHASE.speed_keys, not_by=None)
        if r.hosts == ("node3",)
    ]
    assert referred.status == "warn" and referred.details["refers_to"] == "hardware"
    assert referred.summary.endswith("; caused by node3 having NVLinks down (see the hardware finding)")
