"""NCCL_IB_HCA read as NCCL reads it, on settings and HCA names recorded from real clusters
(tests/data/nccl, sources in SOURCES.md): an entry matched as a prefix that selects more HCAs
than it names warns, with those HCAs; a list that selects what it names does not."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

from checks.environment import judge_environment
from checks.environment.hca_list import also_selected, judge_hca_lists, parse_hca_list
from preflight.facts import NodeFacts

NCCL = Path(__file__).parent / "data" / "nccl"


def _found(pattern: str, text: str) -> str:
    match = re.search(pattern, text)
    assert match is not None, pattern
    return match.group(1)


# nccl-tests #150: the node's HCAs as its UCX_NET_DEVICES lists them, and its NCCL_IB_HCA.
_ISSUE_150 = (NCCL / "hca_list_nccl_tests_150.txt").read_text(encoding="utf-8")
HCAS_150 = [d.split(":")[0] for d in _found(r"UCX_NET_DEVICES=(\S+)", _ISSUE_150).split(",")]
SETTING_150 = _found(r"NCCL_IB_HCA='([^']+)'", _ISSUE_150)
# nccl #1478: one HCA per local rank on nodes with mlx5_0..mlx5_3.
SETTINGS_1478 = re.findall(
    r"^\s*export NCCL_IB_HCA=(\S+)", (NCCL / "hca_list_nccl_1478.txt").read_text(), re.M
)
HCAS_1478 = [s.split(":")[0] for s in SETTINGS_1478]


def node(hcas: list[str], env: dict[str, str] | None = None) -> NodeFacts:
    facts: dict[str, Any] = {
        "hostname": "n",
        "env": env or {},
        "net": {
            "ib_devices": [
                {"name": h, "port": 1, "state": "ACTIVE", "link_layer": "InfiniBand"} for h in hcas
            ]
        },
    }
    return NodeFacts(facts)


def test_the_recorded_captures_read_as_expected() -> None:
    assert SETTING_150 == "^=mlx5_8,^=mlx5_14"
    assert "mlx5_1" in HCAS_150 and "mlx5_10" in HCAS_150 and len(HCAS_150) == 14
    assert SETTINGS_1478 == ["mlx5_0:1", "mlx5_1:1", "mlx5_2:1", "mlx5_3:1"]


def test_parsing_follows_nccl() -> None:
    assert parse_hca_list("^=mlx5_8,^=mlx5_14") == parse_hca_list("^=mlx5_8,^=mlx5_14:1")
    parsed = parse_hca_list("^=mlx5_8,^=mlx5_14")
    assert (parsed.exclude, parsed.exact, parsed.names) == (True, True, ("mlx5_8", "^=mlx5_14"))
    assert parse_hca_list("mlx5_0:1,,mlx5_1").names == ("mlx5_0", "mlx5_1")
    assert parse_hca_list("=mlx5_1").exact and not parse_hca_list("=mlx5_1").exclude


def test_an_hca_name_that_prefixes_others_on_a_real_node_warns_with_what_it_also_selects() -> None:
    nodes = {"gpu1": node(HCAS_150), "gpu2": node(HCAS_150)}
    (result,) = judge_hca_lists({"gpu1": "mlx5_1:1", "gpu2": "mlx5_1:1"}, nodes)
    assert result.status == "warn" and result.hosts == ("gpu1", "gpu2")
    assert result.summary == (
        "NCCL_IB_HCA=mlx5_1:1 on gpu[1-2]: 'mlx5_1' is matched as a prefix, so it also selects "
        "mlx5_10, mlx5_11, mlx5_12, mlx5_13, mlx5_16, mlx5_18; NCCL_IB_HCA==mlx5_1:1 matches names exactly"
    )
    assert result.details["item"] == "hca_prefix" and result.details["entry"] == "mlx5_1"


def test_the_same_setting_on_nodes_without_longer_names_is_fine() -> None:
    for setting in SETTINGS_1478:
        assert judge_hca_lists({"n": setting}, {"n": node(HCAS_1478)}) == []
    assert judge_hca_lists({"n": ",".join(SETTINGS_1478)}, {"n": node(HCAS_1478)}) == []


def test_an_anchored_list_or_a_family_prefix_is_what_the_user_meant() -> None:
    assert judge_hca_lists({"n": "=mlx5_1:1"}, {"n": node(HCAS_150)}) == []
    # "mlx5" is meant to select every mlx5 card, as NCCL's documentation shows it.
    assert judge_hca_lists({"n": "mlx5"}, {"n": node(HCAS_150)}) == []
    assert also_selected("mlx5_", HCAS_150) == []


def test_an_exclusion_that_excludes_more_says_so() -> None:
    (result,) = judge_hca_lists({"n": "^mlx5_1"}, {"n": node(HCAS_150)})
    assert "so it also excludes mlx5_10," in result.summary
    assert result.summary.endswith("NCCL_IB_HCA=^=mlx5_1 matches names exactly")


def test_a_second_marker_in_the_list_names_no_hca() -> None:
    (result,) = judge_hca_lists({"n": SETTING_150}, {"n": node(HCAS_150)})
    assert result.details["item"] == "hca_list_marker" and result.details["entry"] == "^=mlx5_14"
    assert result.summary.startswith("NCCL_IB_HCA=^=mlx5_8,^=mlx5_14 on n: entry '^=mlx5_14' selects no HCA")


@pytest.mark.parametrize("hcas", [[], ["mlx5_0"]])
def test_nothing_to_say_without_the_variable_or_without_longer_names(hcas: list[str]) -> None:
    assert judge_hca_lists({}, {"n": node(HCAS_150)}) == []
    assert judge_hca_lists({"n": "mlx5_1"}, {"n": node(hcas)}) == []


def test_the_environment_check_judges_the_value_the_job_sees() -> None:
    nodes = {
        "gpu1": node(HCAS_150, {"NCCL_IB_HCA": "=mlx5_1"}),
        "gpu2": node(HCAS_150, {"NCCL_IB_HCA": "=mlx5_1"}),
    }
    assert [r.status for r in judge_environment(nodes, {})] == ["pass"]
    # --env overrides what the nodes' shells set, as the launcher would.
    (result,) = judge_environment(nodes, {"NCCL_IB_HCA": "mlx5_1:1"})
    assert (
        result.status == "warn"
        and result.details["item"] == "hca_prefix"
        and result.hosts == ("gpu1", "gpu2")
    )
