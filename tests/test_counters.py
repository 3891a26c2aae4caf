"""The fabric's error counters: as the facts found them on real H100 nodes in service (notes), and
grown while the job ran (findings with their rate), read by the node's own sampler from sysfs
trees written from those captures (tests/data/hardware/counters)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest

from checks.allreduce import judge_allreduce
from checks.hardware import judge_hardware
from checks.hardware.counters import growth_results
from checks.job.node.counters import COUNTERS_MARKER, read_samples, sample, without_samples
from checks.job.outcome import JobOutcome, NodeOutcome
from preflight.config import Config
from preflight.facts import NodeFacts
from preflight.node import net
from tests.lab import GpuNode, MakeLab
from tests.lab.gpu import install_infiniband
from tests.test_allreduce import load_job
from tests.test_check_lab import results as lab_results
from tests.test_check_lab import run_check
from tests.test_distributed_job import job_args, run_job

COUNTERS = Path(__file__).parent / "data" / "hardware" / "counters"
IN_SERVICE = COUNTERS / "sysfs_h100_ndr_in_service.txt"
LIVE_MLX5_1 = COUNTERS / "sysfs_counters_h100_mlx5_1_live.txt"


def in_service_files() -> dict[str, str]:
    """The recorded tree: path under /sys/class/infiniband -> the file's text."""
    files = {}
    for line in IN_SERVICE.read_text(encoding="utf-8").splitlines():
        path, _, value = line.partition(":")
        files[path] = value
    return files


def live_counters() -> dict[str, int]:
    """The counters of the recorded live port (``=== ./name ===`` then its value)."""
    lines = LIVE_MLX5_1.read_text(encoding="utf-8").splitlines()
    return {
        line.strip("= ./"): int(lines[i + 1])
        for i, line in enumerate(lines)
        if line.startswith("=== ./") and lines[i + 1].strip().isdigit()
    }


def write_tree(root: Path, files: dict[str, str]) -> Path:
    for path, value in files.items():
        (root / path).parent.mkdir(parents=True, exist_ok=True)
        (root / path).write_text(value + "\n", encoding="utf-8")
    return root


def facts_node(root: Path) -> NodeFacts:
    """A node whose InfiniBand ports the facts probe's own reader read from ``root``."""
    ib = net.ib_devices(str(root))
    return NodeFacts({"gpus": [], "net": {"interfaces": [], "ib_devices": ib}, "hardware": {}})


def test_the_recorded_nodes_in_service_give_notes_and_no_warning(tmp_path: Path) -> None:
    files = in_service_files()
    nodes = {name: facts_node(write_tree(tmp_path / name, files)) for name in ("gpu1", "gpu2")}
    results = judge_hardware(nodes, Config())
    # (Judged by the port rules, the RoCE bond's 200 Gb/s may be a finding of its own: not the counters'.)
    notes = [r for r in results if r.details.get("item") == "ib_counters"]
    assert all(r.is_note for r in notes)
    assert [r.hosts for r in notes] == [("gpu1",), ("gpu2",)]
    # Every port's count is named, the saturated link_downed as such; port_xmit_wait (congestion
    # ticks, 2489603687 on every port) is not an error and is not named.
    assert "mlx5_0 port 1 port_rcv_errors 14" in notes[0].summary
    assert "mlx5_1 port 1 link_downed 255 (its maximum" in notes[0].summary
    assert "port_xmit_wait" not in notes[0].summary
    assert notes[0].details["counters"]["mlx5_bond_0 port 1"] == {"port_rcv_errors": 14}


def test_link_downed_where_the_other_nodes_same_port_counts_none_is_a_warning(tmp_path: Path) -> None:
    files = in_service_files()
    # The other nodes: the same capture with mlx5_1's link_downed at 0 (changed here).
    clean = {**files, "mlx5_1/ports/1/counters/link_downed": "0"}
    nodes = {"gpu1": facts_node(write_tree(tmp_path / "gpu1", files))}
    nodes |= {name: facts_node(write_tree(tmp_path / name, clean)) for name in ("gpu2", "gpu3")}
    results = judge_hardware(nodes, Config())
    warned = [r for r in results if r.status == "warn"]
    assert [(r.hosts, r.details["item"], r.details["link_downed_alone"]) for r in warned] == [
        (("gpu1",), "ib_counters", ["mlx5_1 port 1"])
    ]
    assert "where the other nodes' same port counts none" in warned[0].summary
    counted = [r for r in results if r.details.get("item") == "ib_counters"]
    assert all(r.is_note for r in counted if r.hosts in (("gpu2",), ("gpu3",)))


def test_the_sampler_reads_every_counter_of_the_recorded_ports(tmp_path: Path) -> None:
    ib = write_tree(tmp_path / "ib", in_service_files())
    live = live_counters()
    port = tmp_path / "ib" / "mlx5_9" / "ports" / "1" / "counters"
    for name, value in live.items():
        (port / name).write_text(f"{value}\n", encoding="utf-8")
    (tmp_path / "net" / "eth0" / "statistics").mkdir(parents=True)
    (tmp_path / "net" / "eth0" / "statistics" / "rx_dropped").write_text("7\n", encoding="utf-8")
    (tmp_path / "net" / "lo").mkdir()
    taken = sample(str(ib), str(tmp_path / "net"))
    assert taken["ib"]["mlx5_0/1"] == {
        "link_layer": "InfiniBand",
        "counters": {"symbol_error": 0, "link_error_recovery": 0, "port_rcv_errors": 14,
                     "port_xmit_discards": 0, "port_xmit_wait": 2489603687, "link_downed": 0,
                     "port_rcv_remote_physical_errors": 0},
    }  # fmt: skip
    assert taken["ib"]["mlx5_9/1"]["counters"]["port_xmit_discards"] == 65535
    assert taken["ib"]["mlx5_bond_0/1"]["link_layer"] == "Ethernet"
    assert taken["net"] == {"eth0": {"rx_dropped": 7}}


def node_with(before: dict[str, Any], after: dict[str, Any], host: str = "gpu2") -> NodeOutcome:
    return NodeOutcome(host, 1, 0, False, False, False, "", counters={"before": before, "after": after})


def grown(
    tmp_path: Path, changes: dict[str, str], seconds: float = 60.0
) -> tuple[dict[str, Any], dict[str, Any]]:
    """Samples of the recorded tree: before, and ``seconds`` later with ``changes`` (built here:
    no public capture of a counter growing between two samples was found)."""
    files = in_service_files()
    before = sample(str(write_tree(tmp_path / "before", files)), str(tmp_path / "no-net"))
    after = sample(str(write_tree(tmp_path / "after", {**files, **changes})), str(tmp_path / "no-net"))
    after["t"] = before["t"] + seconds
    return before, after


def test_symbol_errors_growing_on_a_compute_port_fail_the_node_with_their_rate(tmp_path: Path) -> None:
    before, after = grown(tmp_path, {"mlx5_4/ports/1/counters/symbol_error": "37"})
    job = JobOutcome(("allreduce",), "nccl", "gpu1", 29500, (node_with(before, after),), 61.0)
    (result,) = growth_results(job, "allreduce")
    assert (result.status, result.hosts, result.details["item"]) == ("fail", ("gpu2",), "counter_growth")
    assert result.summary.startswith("gpu2: mlx5_4 port 1 symbol_error +37 (0.617/s) during the 60 s job")
    (row,) = result.details["growth"]
    assert row == {"where": "mlx5_4 port 1", "counter": "symbol_error", "before": 0, "after": 37,
                   "growth": 37, "per_s": 0.6167}  # fmt: skip


def test_one_symbol_error_in_a_minute_is_within_the_specification_and_warns(tmp_path: Path) -> None:
    before, after = grown(tmp_path, {"mlx5_4/ports/1/counters/symbol_error": "1"})
    job = JobOutcome(("allreduce",), "nccl", "gpu1", 29500, (node_with(before, after),), 61.0)
    (result,) = growth_results(job, "allreduce")
    assert result.status == "warn"


def test_a_link_down_during_the_job_fails_and_discards_on_the_roce_bond_warn(tmp_path: Path) -> None:
    before, after = grown(
        tmp_path,
        {"mlx5_0/ports/1/counters/link_downed": "1", "mlx5_bond_0/ports/1/counters/port_xmit_discards": "5"},
    )
    job = JobOutcome(("allreduce",), "nccl", "gpu1", 29500, (node_with(before, after),), 61.0)
    (result,) = growth_results(job, "allreduce")
    assert result.status == "fail"
    assert [(r["where"], r["counter"]) for r in result.details["growth"]] == [
        ("mlx5_0 port 1", "link_downed"),
        ("mlx5_bond_0 port 1", "port_xmit_discards"),
    ]
    # A RoCE symbol error on a front-end bond NCCL did not use: a warning, not a fail.
    before, after = grown(tmp_path / "bond", {"mlx5_bond_0/ports/1/counters/symbol_error": "500"})
    job = JobOutcome(("allreduce",), "nccl", "gpu1", 29500, (node_with(before, after),), 61.0)
    assert [r.status for r in growth_results(job, "allreduce")] == ["warn"]


def test_congestion_ticks_saturated_counters_and_drops_are_no_warning(tmp_path: Path) -> None:
    before, after = grown(tmp_path, {"mlx5_0/ports/1/counters/port_xmit_wait": "2999999999"})
    before["net"] = {"eth0": {"rx_dropped": 100, "rx_errors": 0}}
    after["net"] = {"eth0": {"rx_dropped": 112, "rx_errors": 0}}
    job = JobOutcome(("allreduce",), "nccl", "gpu1", 29500, (node_with(before, after),), 61.0)
    (result,) = growth_results(job, "allreduce")
    assert result.is_note
    assert result.summary.startswith("gpu2: eth0 rx_dropped +12 (0.2/s) during the 60 s job")
    # A counter cleared during the job (lower after) is no growth.
    after["net"] = {"eth0": {"rx_dropped": 3, "rx_errors": 0}}
    after["ib"] = before["ib"]
    assert growth_results(dataclasses.replace(job, nodes=(node_with(before, after),)), "allreduce") == []


def test_the_allreduce_check_reports_the_growth_of_a_recorded_job(tmp_path: Path) -> None:
    job = load_job("one_node_three_ranks")
    before, after = grown(tmp_path, {"mlx5_5/ports/1/counters/link_downed": "2"})
    host = job.nodes[0].host
    nodes = (dataclasses.replace(job.nodes[0], counters={"before": before, "after": after}), *job.nodes[1:])
    results = judge_allreduce(dataclasses.replace(job, nodes=nodes), Config(), {})
    grown_results = [r for r in results if r.details.get("item") == "counter_growth"]
    assert [(r.status, r.hosts) for r in grown_results] == [("fail", (host,))]
    assert "mlx5_5 port 1 link_downed +2" in grown_results[0].summary
    # Without samples (an older host, a killed one) the job is judged as before.
    assert not any(r.details.get("item") == "counter_growth" for r in judge_allreduce(job, Config(), {}))


def test_the_samples_line_is_read_back_and_kept_out_of_the_stored_stderr() -> None:
    samples = {"before": {"t": 1.0, "ib": {}, "net": {}}, "after": {"t": 2.0, "ib": {}, "net": {}}}
    stderr = f"rank 0 says hello\n{COUNTERS_MARKER}{json.dumps(samples)}\nlast line\n"
    assert read_samples(stderr) == samples
    assert without_samples(stderr.encode()) == b"rank 0 says hello\nlast line\n"
    assert read_samples("no samples here\n") is None


def test_the_node_host_samples_the_counters_around_a_real_job() -> None:
    args = job_args(1, phases=("ddp",))
    args["ddp"] = {"steps": 2}
    (node,) = run_job(1, 1, args)
    assert node.returncode == 0, node.stderr[-2000:]
    samples = read_samples(node.stderr)
    assert samples is not None
    before, after = samples["before"], samples["after"]
    assert after["t"] > before["t"]
    # This machine's interfaces, read at both ends; lo left out.
    assert set(before["net"]) == set(after["net"]) and "lo" not in before["net"]


@pytest.mark.lab
def test_symbol_errors_that_grow_while_the_job_runs_fail_their_node_on_the_lab(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    """Two CPU nodes with four InfiniBand HCAs each (the lab's tree, mounted in each node's own
    /sys/class/infiniband); while the job runs, node 2's mlx5_1 port counts 500 symbol errors. The
    growth fails node 2 alone.

    The counters are read before the ranks start and after they end, so the bump lands in between
    as soon as the ranks are seen; the sweep is made to last its budget (a few seconds) so that
    the lab's look at the node's processes cannot miss a fast job."""
    lab = make_lab(2)
    config = tmp_path / "long_sweep.toml"
    config.write_text("[allreduce]\niters = 400\nsweep_budget_s = 4.0\n")
    for target in lab.nodes:
        commands = install_infiniband(target.node_dir / "ib", GpuNode(infiniband=True))
        lab.exec(target, ["sh", "-c", " && ".join(commands)])
    victim = lab.nodes[1]
    counter = "/sys/class/infiniband/mlx5_1/ports/1/counters/symbol_error"
    bump = lab.when_the_job_runs(
        victim, lambda: lab.exec(victim, ["sh", "-c", f"echo 500 > {counter}"]), after_s=0.0
    )
    run, data = run_check(lab, tmp_path, "--only", "allreduce", "--config", str(config))
    bump.join(5)
    assert not bump.is_alive()
    assert run.returncode == 1, run.stdout + run.stderr
    (grew,) = [r for r in lab_results(data, "allreduce") if r["details"].get("item") == "counter_growth"]
    assert (grew["status"], grew["hosts"]) == ("fail", [victim.address])
    assert grew["summary"].startswith(f"{victim.address}: mlx5_1 port 1 symbol_error +500 (")
    (row,) = [r for r in grew["details"]["growth"] if r["where"] == "mlx5_1 port 1"]
    assert row["before"] == 0 and row["after"] == 500 and row["per_s"] > 0
