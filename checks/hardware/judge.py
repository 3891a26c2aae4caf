"""The ``hardware`` judge: GPU and fabric health from the facts every node reported, nodes compared
with each other: PCIe links narrower than the device can train (GPUs, NICs, HCAs), NVLinks down
where the same GPUs elsewhere have them up, a GPU slowing itself down (hardware slowdown,
thermal, power brake), persistence mode off where the others have it on, InfiniBand ports down
or slower than their like ports (``ib_ports``), HCAs missing, error counters, NVSwitches without
a running fabric manager of the driver's version, or GPUs not registered with their fabric
(``fabric``), XID errors in the kernel log and its PCIe, machine-check and block I/O errors
(``kernel_errors``), memory CPUs and local NVMe disks below the nodes of the same kind
(``resources``), GPUs, ports and PCI devices whose readings a tool answered with an error
(``reading_errors``). Pure: facts in, findings out.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from checks.compute.judge import CAUSES
from checks.hardware.counters import facts_results
from checks.hardware.details import (
    Audited,
    Finding,
    GpuNvlink,
    GpuPcieWidth,
    GpuSlowdown,
    HcasMissing,
    NodeFinding,
)
from checks.hardware.fabric import judge_fabric
from checks.hardware.gpu_link_errors import judge_gpu_link_errors
from checks.hardware.gpu_settings import judge_gpu_settings
from checks.hardware.ib_partitions import judge_ib_partitions
from checks.hardware.ib_ports import ACTIVE_IB, judge_ib_ports
from checks.hardware.kernel_errors import kernel_error_findings
from checks.hardware.kernel_log import xid_findings
from checks.hardware.pcie_errors import judge_pcie_errors
from checks.hardware.pcie_topology import judge_pcie_topology
from checks.hardware.reading_errors import judge_reading_errors
from checks.hardware.resources import judge_resources
from checks.hardware.settings import HardwareSection
from checks.job.node.nvml import reason_names
from preflight.config import Config
from preflight.facts import GpuFacts, NodeFacts
from preflight.model import CheckResult, with_check_details
from preflight.nodeset import fold

NAME = "hardware"
# Clock-event reasons a GPU gives for slowing itself down (not idle, not a power cap under load).
SELF_SLOWDOWN = {name: text.split(" (")[0] for name, text in CAUSES}


def _gpu_label(gpu: GpuFacts) -> str:
    serial = f" (serial {gpu.serial})" if gpu.serial else ""
    return f"GPU {gpu.index if gpu.index is not None else '?'}{serial}"


def _gpu_findings(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    results: list[CheckResult] = []
    # The generation most GPUs of each maximum run at now: a GPU below it is compared with its
    # peers, since an idle GPU may train its link down on purpose.
    usual_gen: dict[int, int] = {}
    gens: dict[int, Counter[int]] = {}
    for node in nodes.values():
        for gpu in node.gpus or []:
            link = gpu.pcie_link
            if link and link.gen_max is not None and link.gen_current is not None:
                gens.setdefault(link.gen_max, Counter())[link.gen_current] += 1
    usual_gen = {top: counts.most_common(1)[0][0] for top, counts in gens.items()}
    for host, node in nodes.items():
        narrow = [g for g in node.gpus or [] if g.pcie_link is not None and g.pcie_link.narrow]
        if narrow:
            shown = "; ".join(f"{_gpu_label(g)} PCIe {g.pcie_link.text()}" for g in narrow if g.pcie_link)
            width: GpuPcieWidth = {
                "item": "gpu_pcie_width",
                "node": host,
                "gpus": [g.index for g in narrow],
                "serials": [g.serial for g in narrow],
            }
            results.append(
                CheckResult(NAME, "fail", f"{host}: {shown} (fewer lanes than it can use)", (host,), width)
            )
        slow_gen = [
            g for g in node.gpus or []
            if (link := g.pcie_link) and link.gen_max is not None and link.gen_current is not None
            and link.gen_current < usual_gen.get(link.gen_max, link.gen_current)
        ]  # fmt: skip
        if slow_gen:
            shown = "; ".join(f"{_gpu_label(g)} PCIe {g.pcie_link.text()}" for g in slow_gen if g.pcie_link)
            summary = f"{host}: {shown}, below the generation the other GPUs run at"
            results.append(
                CheckResult(NAME, "warn", summary, (host,), NodeFinding(item="gpu_pcie_gen", node=host))
            )
        slowing = []
        for gpu in node.gpus or []:
            names = [n for n in reason_names(gpu.clock_event_reasons or 0) if n in SELF_SLOWDOWN]
            if names:
                slowing.append((gpu, names))
        if slowing:
            shown = "; ".join(
                f"{_gpu_label(g)} in {' and '.join(SELF_SLOWDOWN[n] for n in names)}"
                + (f" at {g.temperature_c:g} \u00b0C" if g.temperature_c is not None else "")
                for g, names in slowing
            )
            slowdown: GpuSlowdown = {
                "item": "gpu_slowdown",
                "node": host,
                "gpus": [g.index for g, _ in slowing],
                "reasons": sorted({n for _, names in slowing for n in names}),
            }
            results.append(
                CheckResult(NAME, "fail", f"{host}: {shown} before the job started", (host,), slowdown)
            )
    modes = {
        host: {g.persistence_mode for g in node.gpus or [] if g.persistence_mode}
        for host, node in nodes.items()
    }
    enabled = [h for h, m in modes.items() if m == {"enabled"}]
    off = [h for h, m in modes.items() if "disabled" in m]
    if off and enabled:
        summary = f"{fold(off)}: persistence mode off on some GPUs, on everywhere on {fold(enabled)}"
        results.append(CheckResult(NAME, "warn", summary, tuple(off), Finding(item="persistence_mode")))
    elif off and all(m == {"disabled"} for m in modes.values() if m):
        # Alike everywhere, and still not as NVIDIA's data-centre guide has it: without persistence
        # (nvidia-persistenced) the driver tears each GPU down when its last client exits, so every
        # job's CUDA start initialises the GPUs again, and settings made by hand are lost.
        summary = (
            f"{fold(off)}: persistence mode off on every GPU: each job's start initialises the GPUs "
            "again (seconds each), and clocks or limits set by hand do not stay"
        )
        results.append(CheckResult(NAME, "warn", summary, tuple(off), Finding(item="persistence_mode")))
    return results


def _denylisted_findings(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """Nodes with nouveau loaded where the run has NVIDIA GPUs (DCGM's denylist): the open-source
    driver holds the GPUs, and the NVIDIA driver cannot drive them."""
    gpus = any(n.gpus for n in nodes.values()) or any(
        d.get("kind") == "gpu" for n in nodes.values() for d in n.pci_devices
    )
    held = [h for h, n in nodes.items() if n.value(("kernel_modules", "nouveau")) == "loaded"]
    if not (gpus and held):
        return []
    summary = (
        f"{fold(held)}: the nouveau module is loaded, which keeps the NVIDIA driver off the GPUs "
        "(CUDA and NVML cannot use them)"
    )
    return [CheckResult(NAME, "fail", summary, tuple(held), Finding(item="denylisted_module"))]


def _ib_findings(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    results: list[CheckResult] = []
    with_ib = {h: n.ib_ports for h, n in nodes.items() if n.ib_ports}
    if not with_ib:
        return results
    hca_sets = {h: frozenset(p.device for p in ports) for h, ports in with_ib.items()}
    usual_hcas = Counter(hca_sets.values()).most_common(1)[0][0]
    for host in nodes:
        ports = with_ib.get(host)
        if ports is None:
            if len(with_ib) > len(nodes) / 2:
                summary = (
                    f"{host}: no InfiniBand/RoCE port, while {fold(with_ib)} have {len(usual_hcas)} HCAs"
                )
                results.append(
                    CheckResult(NAME, "fail", summary, (host,), NodeFinding(item="ib_hcas", node=host))
                )
            continue
        missing = sorted(usual_hcas - hca_sets[host])
        if missing and len(with_ib) > 1:
            summary = f"{host}: HCAs {', '.join(missing)} missing (the other nodes have them)"
            results.append(
                CheckResult(NAME, "fail", summary, (host,), HcasMissing(item="ib_hcas", missing=missing))
            )
    return results


def _nic_findings(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    results: list[CheckResult] = []
    for host, node in nodes.items():
        links = [(i.name, i.pcie) for i in node.interfaces if i.pcie is not None]
        links += [(p.device, p.pcie) for p in node.ib_ports if p.pcie is not None]
        narrow = sorted({(name, link.text()) for name, link in links if link is not None and link.narrow})
        if narrow:
            shown = "; ".join(f"{name} PCIe {text}" for name, text in narrow)
            summary = f"{host}: {shown} (fewer lanes than the NIC can use)"
            results.append(
                CheckResult(NAME, "fail", summary, (host,), NodeFinding(item="nic_pcie_width", node=host))
            )
    return results


def _links_text(links: Sequence[int]) -> str:
    numbers = [str(n) for n in links]
    return (
        f"NVLink {numbers[0]}"
        if len(numbers) == 1
        else f"NVLinks {', '.join(numbers[:-1])} and {numbers[-1]}"
    )


def _nvlink_findings(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """A GPU whose driver lists NVLinks as inactive (or says all are), with fewer up than the most
    any GPU of its model in the run has: a link that trained down (a board, cable or NVSwitch
    port). GPUs whose unused links read inactive alike (an NVLink bridge across two cards, or
    none fitted) are not named."""
    most: dict[str | None, int] = {}
    for node in nodes.values():
        for gpu in node.gpus or []:
            if gpu.nvlinks_up is not None:
                most[gpu.name] = max(most.get(gpu.name, 0), gpu.nvlinks_up)
    results: list[CheckResult] = []
    for host, node in nodes.items():
        # A GPU that answers nothing but errors is named for that (reading_errors), not its links.
        short = [
            g for g in node.gpus or []
            if not g.unreadable and (g.nvlinks_inactive or g.nvlinks_all_inactive)
            and g.nvlinks_up is not None and g.nvlinks_up < most[g.name]
        ]  # fmt: skip
        if not short:
            continue
        shown = "; ".join(
            f"{_gpu_label(g)} "
            f"{_links_text(g.nvlinks_inactive) if g.nvlinks_inactive else 'all NVLinks'} inactive, "
            f"{g.nvlinks_up} up"
            for g in short
        )
        model = f"{short[0].name} GPUs" if short[0].name else "GPUs of this model"
        summary = f"{host}: {shown} (the other {model} have {most[short[0].name]} up)"
        nvlink: GpuNvlink = {
            "item": "gpu_nvlink",
            "node": host,
            "gpus": [g.index for g in short],
            "inactive": {str(g.index): g.nvlinks_inactive for g in short},
        }
        results.append(CheckResult(NAME, "fail", summary, (host,), nvlink))
    return results


def judge_hardware(nodes: Mapping[str, NodeFacts], config: Config) -> list[CheckResult]:
    """Every hardware finding across the nodes; a pass saying what was seen when there is none."""
    results = (
        judge_reading_errors(nodes)
        + _gpu_findings(nodes)
        + _denylisted_findings(nodes)
        + _nvlink_findings(nodes)
        + _ib_findings(nodes)
        + judge_ib_ports(nodes)
        + judge_ib_partitions(nodes)
        + _nic_findings(nodes)
        + judge_fabric(nodes)
        + judge_resources(nodes)
        + judge_pcie_topology(nodes)
    )
    xid_results, unreadable, noted = xid_findings(nodes, config.section(HardwareSection).ignore_xids)
    results += xid_results
    # The kernel log's PCIe, machine-check and block I/O errors; the AER counters leave out what it names.
    log_results, logged = kernel_error_findings(nodes)
    results += log_results
    # Error counters and GPU settings: notes, shown after the findings (or the pass), and findings.
    results += facts_results(nodes) + judge_gpu_settings(nodes) + judge_pcie_errors(nodes, logged)
    results += judge_gpu_link_errors(nodes)
    notes = [r for r in results if r.is_note]
    results = [r for r in results if not r.is_note]
    gpus = sum(n.gpu_count for n in nodes.values())
    ports = [p for n in nodes.values() for p in n.ib_ports]
    details: Audited = {
        "gpus": gpus,
        "ib_ports": len(ports),
        "ib_ports_active": sum(1 for p in ports if p.state == ACTIVE_IB),
        "xid_not_readable": unreadable,
    }
    if results:
        return with_check_details(results, details) + notes
    # A GPU that answered errors is no healthy GPU, whichever check named it.
    answered = sum(1 for n in nodes.values() for g in n.gpus or [] if not g.errors)
    seen = (
        [f"{answered} GPUs with their PCIe links at full width and none slowing itself down"] if gpus else []
    )
    if answered < gpus:
        seen[0] += f" ({gpus - answered} more answering errors, named elsewhere)"
    registered = sum(1 for n in nodes.values() for g in n.gpus or [] if g.fabric_state == "completed")
    if registered:
        seen[0] += f", {'all' if registered == gpus else registered} registered with their NVSwitch fabric"
    active = details["ib_ports_active"]
    if ports:
        of = "" if active == len(ports) else f" of {len(ports)}"
        seen.append(f"{active}{of} InfiniBand/RoCE ports ACTIVE")
    readable = [h for h in nodes if h not in unreadable and h not in noted and nodes[h].hardware.get("xid")]
    if readable:
        seen.append(f"no XID error in the kernel log of {fold(readable)}")
    if noted:
        seen.append(f"only XIDs that need no action on {fold(noted)} (see the notes)")
    if unreadable:
        seen.append(f"kernel log not readable on {fold(unreadable)}, so XID errors are unknown there")
    summary = f"{len(nodes)} node{'s' if len(nodes) != 1 else ''}: " + (
        "; ".join(seen) if seen else "no GPU or InfiniBand hardware to audit"
    )
    return [CheckResult(NAME, "pass", summary, (), details), *notes]
