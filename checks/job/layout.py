"""Where and how the job runs on each node, decided from the nodes' facts before anything starts
(pure): CUDA or the CPU, how many ranks per node (what CUDA can see, not what NVML lists), and the
socket interface NCCL and gloo bind to (the node's own setting kept where it has one).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from checks.job.outcome import JobNotRun
from preflight.facts import NodeFacts
from preflight.nodeset import fold, group_by_value

Backend = Literal["nccl", "gloo"]
# Variables through which a site pins the interfaces; NCCL also reads them from /etc/nccl.conf.
SOCKET_VARIABLES = ("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME")


@dataclass(frozen=True)
class Devices:
    """CUDA or not, ranks per node, and nodes whose GPUs the job leaves untested (host -> why)."""

    gpu: bool
    nproc: Mapping[str, int]
    untested: Mapping[str, str] = field(default_factory=dict)


def _cuda_count(node: NodeFacts) -> int:
    torch = node.torch
    if torch is None or not torch.cuda_available:
        return 0
    return torch.device_count or 0


def _visible(node: NodeFacts) -> str:
    value = node.env.get("CUDA_VISIBLE_DEVICES")
    return f" (CUDA_VISIBLE_DEVICES={value})" if value is not None else ""


def decide_devices(
    nodes: Mapping[str, NodeFacts], slots: Mapping[str, int | None], backend: Backend | None
) -> Devices | JobNotRun:
    """NCCL on CUDA where every node has GPUs that torch can use, gloo on the CPU otherwise.

    GPUs that NVML or nvidia-smi list but torch cannot use (a CPU build of torch, no CUDA device
    visible) are a failure, not a quiet fall-back to the CPU: the job would measure the wrong
    thing. ``slots`` beyond what CUDA sees fails; fewer ranks than GPUs is said, not failed.
    """
    with_gpus = {h: n for h, n in nodes.items() if n.gpus}
    if backend == "gloo" or (backend is None and len(with_gpus) < len(nodes)):
        return Devices(gpu=False, nproc={h: slots.get(h) or 1 for h in nodes})
    blind = {h: n for h, n in with_gpus.items() if _cuda_count(n) == 0}
    if blind:
        reasons = {
            h: f"{n.gpu_count} GPUs listed, torch {n.torch.version if n.torch else '?'} sees no CUDA device"
            + _visible(n)
            for h, n in blind.items()
        }
        shown = "; ".join(f"{fold(hosts)}: {why}" for why, hosts in group_by_value(reasons))
        return JobNotRun(
            "fail",
            f"the job cannot use the GPUs: {shown}; install a CUDA build of torch in the training "
            "environment (or pass --backend gloo to test the CPU path)",
            tuple(blind),
            {"item": "cuda", "reasons": reasons},
        )
    nproc: dict[str, int] = {}
    too_many: dict[str, str] = {}
    untested: dict[str, str] = {}
    for host, node in nodes.items():
        visible = _cuda_count(node)
        asked = slots.get(host)
        if asked is not None and asked > visible:
            too_many[host] = f"slots={asked} but torch sees {visible} CUDA devices{_visible(node)}"
        count = asked or visible
        nproc[host] = count
        listed = node.gpu_count
        if count < listed:
            why = f"slots={asked}" if asked is not None and asked < visible else f"torch sees {visible}"
            untested[host] = f"{listed - count} of its {listed} GPUs untested ({why}{_visible(node)})"
    if too_many:
        shown = "; ".join(f"{fold(hosts)}: {why}" for why, hosts in group_by_value(too_many))
        return JobNotRun(
            "fail", f"more ranks than GPUs: {shown}", tuple(too_many), {"item": "slots", "reasons": too_many}
        )
    return Devices(gpu=True, nproc=nproc, untested=untested)


def socket_interface(node: NodeFacts, route: Mapping[str, Any], configured: str) -> str | None:
    """The interface this node's ranks reach the master on, for NCCL_SOCKET_IFNAME and
    GLOO_SOCKET_IFNAME; None to leave the node's own choice.

    ``[allreduce] socket_ifname`` wins; then the node's own setting (its environment: the real
    job sees that, so the check must too); then the route to the master. On the master the
    route is loopback: the interface that holds the address its peers use is the one.
    """
    if configured:
        return configured
    if any(node.env.get(name) for name in SOCKET_VARIABLES):
        return None
    dev = route.get("dev")
    if dev and dev != "lo":
        return str(dev)
    address = route.get("address")
    holder = node.interface_with(str(address)) if address else None
    return holder.name if holder else None


def socket_environment(ifname: str | None) -> dict[str, str]:
    """The variables that pin ``ifname``. NCCL reads NCCL_SOCKET_IFNAME as a list of prefixes
    (``eth1`` also matches ``eth10``); a leading ``=`` asks for the exact name."""
    if not ifname:
        return {}
    return {"NCCL_SOCKET_IFNAME": f"={ifname}", "GLOO_SOCKET_IFNAME": ifname}
