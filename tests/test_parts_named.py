"""The part a finding is about, as each check declares it (``Check.parts_named``) in the facts' own
terms, and as the history store keeps it: a slow rail's GPU by its PCI address, a CPU node's rail by
its interface, an XID's GPU, a GPU whose reading stands out, the GPU a burn names slow. Judged on
recorded lab runs (tests/data/rails) and recorded GPU facts (tests/data/gpu_h100_580, tests/data/facts,
an H100 node's InfiniBand tree in tests/data/hardware/ib; SOURCES.md in each)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from checks.hardware.ib_ports import judge_ib_ports
from checks.job.node.rails import gpu_address
from checks.rails.measures import RAIL_BUSBW
from preflight.history.record import Part, findings_of, parts_of, rates_of
from preflight.measures import PartRef
from preflight.model import CheckResult, HostReport, RunReport
from preflight.registry import parts_named_by
from reports import prometheus
from tests.test_ib_ports import tree_node
from tests.test_kernel_log import events, judged
from tests.test_rails import changed, failures, job
from tests.test_readings import H100, _cluster, _problems

# The one real H100 of tests/data/gpu_h100_580: NVML and nvidia-smi write its address so.
H100_PCI = H100["gpus"][0]["pci_bus_id"]
H100_SERIAL = H100["gpus"][0]["serial"]


def _host(name: str, facts: Mapping[str, Any]) -> HostReport:
    return HostReport(name=name, address=name, hostname=name, reachable=True, facts=dict(facts))


def _parts(hosts: list[HostReport]) -> dict[str, list[Part]]:
    return {h.name: parts_of(h) for h in hosts}


def test_a_rank_writes_its_gpus_address_as_the_facts_do() -> None:
    # torch's device properties of that H100 (domain 0, bus 0, device 6), as the rails phase reads them.
    props = SimpleNamespace(pci_domain_id=0, pci_bus_id=0x00, pci_device_id=0x06)
    torch = SimpleNamespace(cuda=SimpleNamespace(get_device_properties=lambda device: props))
    assert gpu_address(SimpleNamespace(torch=torch, device=0)) == H100_PCI == "00000000:00:06.0"  # type: ignore[arg-type]
    props = SimpleNamespace(pci_domain_id=0, pci_bus_id=0x9A, pci_device_id=0)
    assert gpu_address(SimpleNamespace(torch=torch, device=0)) == "00000000:9A:00.0"  # type: ignore[arg-type]


def test_a_slow_gpu_rail_is_kept_by_the_history_under_the_gpu_the_facts_name() -> None:
    # The recorded run whose 10.199.1.12 had its second rail throttled, as GPU nodes report it:
    # that node's rail 1 is the H100 at 00000000:00:06.0.
    def as_gpu_job(document: dict[str, Any]) -> None:
        document["device"] = "cuda"
        cards = document["rails"]["cards"]
        for card in cards:
            card.pop("interfaces")
        cards.append(dict(cards[1], rank=4, local_rank=1, gpu=H100_PCI))

    (finding,) = failures(changed(job("lab_three_nodes_rail2_throttled"), as_gpu_job))
    assert finding.summary.startswith(f"10.199.1.12's rail 1 (GPU 1 at {H100_PCI}) is slow")
    hosts = [_host("10.199.1.12", H100)]
    assert [f.part for f in findings_of(finding, _parts(hosts))] == [H100_SERIAL]
    rates = [r for r in rates_of([finding], _parts(hosts)) if r.node == "10.199.1.12"]
    (kept,) = [r for r in rates if r.part == H100_SERIAL]
    assert kept.metric == "rail_busbw" and kept.value == min(
        r.value for r in rates_of([finding], _parts(hosts))
    )


def test_a_cpu_nodes_slow_rail_is_its_interface_and_every_rail_is_published() -> None:
    (finding,) = failures(job("lab_three_nodes_rail2_throttled"))
    assert parts_named_by("rails")(finding) == {"10.199.1.12": [PartRef("nic", slot="rail2")]}  # type: ignore[misc]
    samples = RAIL_BUSBW.read(finding)
    by_rail = {(s.node, dict(s.labels)["rail"]): s for s in samples}
    assert len(by_rail) == 6  # three nodes, two rails
    slow = by_rail[("10.199.1.12", "1")]
    assert slow.ref == PartRef("nic", slot="rail2")
    # The throttled card's best test is its slowest; its neighbours' best tests on that rail are healthy.
    others = [s.value for (node, rail), s in by_rail.items() if rail == "1" and node != "10.199.1.12"]
    assert slow.value < 0.5 * min(others)
    # Kept by its interface's name: the lab's rails are veths, no network card of their own.
    kept = {(r.node, r.part) for r in rates_of([finding], {})}
    assert ("10.199.1.12", "rail2") in kept and ("10.199.1.11", "rail2") in kept
    textfile = prometheus.render(_report([finding]))
    assert 'preflight_rail_busbw_gbytes_per_second{check="rails",node="10.199.1.12",rail="1"}' in textfile


def _report(results: list[CheckResult]) -> RunReport:
    return RunReport.build(
        tool_version="test", started_at="2026-11-29T00:00:00Z", duration_s=1.0, hosts=[], results=results
    )


def test_an_xid_names_its_gpu_by_its_pci_address() -> None:
    (lost,) = events("dmesg_fallen_multiline_570.txt")
    pcis = ("00000000:1B:00.0", "00000000:B3:00.0")
    (result,) = judged([lost], pcis)
    gpus = [
        dict(H100["gpus"][0], index=i, serial=f"16549220{i:05d}", pci_bus_id=p) for i, p in enumerate(pcis)
    ]
    hosts = [_host("gpu1", {**H100, "gpus": gpus})]
    assert [f.part for f in findings_of(result, _parts(hosts))] == ["1654922000001"]


def test_a_gpu_whose_reading_stands_out_is_the_part_of_the_finding() -> None:
    cluster = _cluster(3)
    cluster["gpu2"]["gpus"][5]["temperature_c"] = 49 + 45
    (result,) = _problems(cluster)
    hosts = [_host(name, facts) for name, facts in cluster.items()]
    serial = cluster["gpu2"]["gpus"][5]["serial"]
    assert [(f.node, f.part) for f in findings_of(result, _parts(hosts))] == [("gpu2", serial)]


def test_a_finding_about_no_part_names_none() -> None:
    cluster = _cluster(3)
    hosts = [_host(name, facts) for name, facts in cluster.items()]
    serial = cluster["gpu2"]["gpus"][5]["serial"]
    # A node's finding that happens to quote a GPU's serial in its words is about the node.
    result = CheckResult("limits", "fail", f"gpu2: memlock 64 KiB ({serial})", ("gpu2",), {"item": "memlock"})
    assert [f.part for f in findings_of(result, _parts(hosts))] == [None]


def test_a_port_down_is_kept_by_the_history_under_that_port(tmp_path: Path) -> None:
    # The recorded H100 node's sysfs tree (tests/data/hardware/ib), one compute HCA's port down on gpu2.
    down = {"mlx5_4": {"state": "1: DOWN", "phys_state": "2: Polling", "rate": "10 Gb/sec (4X SDR)"}}
    nodes = {f"gpu{i}": tree_node(tmp_path, f"gpu{i}", down if i == 2 else None) for i in range(1, 4)}
    (finding,) = judge_ib_ports(nodes)
    assert finding.details["item"] == "ib_port_down"
    assert parts_named_by("hardware")(finding) == {"gpu2": [PartRef("hca", slot="mlx5_4/1")]}  # type: ignore[misc]
    hosts = [_host(name, node.raw) for name, node in nodes.items()]
    (kept,) = findings_of(finding, _parts(hosts))
    (port,) = [p for p in parts_of(hosts[1]) if p.slot == "mlx5_4/1"]
    assert kept.part == port.part and port.part.endswith("/1")  # the card's GUID and the port


def test_a_port_finding_that_names_no_one_port_is_kept_under_its_node() -> None:
    counters = {"mlx5_0 port 1": {"symbol_error": 9}, "mlx5_1 port 1": {"symbol_error": 4}}
    counted = CheckResult(
        "hardware", "warn", "gpu1: mlx5_0 port 1 and mlx5_1 port 1 count symbol errors", ("gpu1",),
        {"item": "ib_counters", "node": "gpu1", "counters": counters},
    )  # fmt: skip
    assert parts_named_by("hardware")(counted) == {  # type: ignore[misc]
        "gpu1": [PartRef("hca", slot="mlx5_0/1"), PartRef("hca", slot="mlx5_1/1")]
    }
    assert [f.part for f in findings_of(counted, {})] == [None]
