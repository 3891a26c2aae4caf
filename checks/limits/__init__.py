"""``limits``: the resource limits, shared memory and scratch space a job needs, on every node alike.

``/dev/shm`` is judged against a need (``[limits] min_shm``: NCCL's shared-memory transport and
DataLoader workers live there, and a container's default is 64 MiB) and against the other nodes;
the scratch space, where the job and its libraries write (the temporary directory, the caches of
torch, TorchInductor, Triton and Hugging Face), against ``[limits] min_scratch_free`` and
``min_scratch_inodes``, whether the job's user may write there, and against the other nodes
(:mod:`checks.limits.scratch`);
the locked-memory limit against RDMA's need where a node has RDMA devices, else against the other
nodes; the open-files limit against ``[limits] min_nofile``. Limits are those of the session the
node is reached in (SSH, or an srun step), which is what a job launched the same way inherits
(torchrun over SSH, pdsh, mpirun; srun). The judge is here; ``details`` says what its findings
carry, ``present`` shows them.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from checks.limits.details import (
    NAME,
    LimitsDetails,
    MemlockDiffers,
    MemlockShort,
    NodeLimits,
    NofileLow,
    Rows,
    ShmBelowNeed,
    ShmBelowPeers,
    ShmFull,
)
from checks.limits.explain import EXPLAINS
from checks.limits.present import PRESENTATION
from checks.limits.scratch import judge_scratch, least_free
from checks.limits.settings import LimitsSection
from preflight.check import Check, CheckContext
from preflight.config import Config
from preflight.facts import Limit, NodeFacts
from preflight.findings import finding
from preflight.model import CheckResult, with_check_details
from preflight.nodeset import fold, group_by_value, minority, natural_key
from preflight.settings import PROFILES, Settings
from preflight.status import Status
from preflight.units import capacity

__all__ = ["CHECK", "NAME", "PRESENTATION", "NodeLimits", "judge_limits", "limit_text"]


# A /dev/shm this much smaller than the median of the other nodes' stands out even above the need.
SHM_PEER_RATIO = 0.25


def _result(status: Status, summary: str, hosts: Sequence[str], details: LimitsDetails) -> CheckResult:
    return finding(NAME, status, summary, hosts, details)


def limit_text(value: int | None) -> str:
    """A size limit as people read it: ``unlimited``, ``64 KiB``."""
    return "unlimited" if value is None else capacity(value)


def _below(value: int | None, need: int | None) -> bool:
    """Whether a limit (None: unlimited) is below a need (None: unlimited)."""
    if value is None:
        return False
    return need is None or value < need


def _judge_shm(nodes: Mapping[str, NodeFacts], need: int) -> list[CheckResult]:
    findings: list[CheckResult] = []
    sizes = {h: n.shm.size_bytes for h, n in nodes.items() if n.shm is not None}
    small = {h: size for h, size in sizes.items() if size < need}
    for size, hosts in group_by_value(small):
        findings.append(
            _result(
                "fail",
                f"{fold(hosts)}: /dev/shm is {capacity(size)}, below the {capacity(need)} a job needs: "
                "NCCL's shared-memory transport and DataLoader workers allocate there (a container's "
                "default is 64 MiB)",
                hosts,
                ShmBelowNeed(item="shm", size_bytes=size, need_bytes=need),
            )
        )
    for host, size in sizes.items():
        others = [s for h, s in sizes.items() if h != host]
        if host in small or len(others) < 2:
            continue
        median = statistics.median(others)
        if size < SHM_PEER_RATIO * median:
            findings.append(
                _result(
                    "warn",
                    f"{host}: /dev/shm is {capacity(size)}, under a quarter of the other nodes' "
                    f"({capacity(median)} median)",
                    [host],
                    ShmBelowPeers(item="shm", size_bytes=size, median_bytes=median),
                )
            )
    full = {
        h: n.shm.free_bytes
        for h, n in nodes.items()
        if n.shm is not None and h not in small and n.shm.free_bytes is not None and n.shm.free_bytes < need
    }
    for host, free in full.items():
        findings.append(
            _result(
                "warn",
                f"{host}: only {capacity(free)} of /dev/shm is free, below the {capacity(need)} a job "
                "needs: leftover segments of an earlier job?",
                [host],
                ShmFull(item="shm_free", free_bytes=free, need_bytes=need),
            )
        )
    return findings


def _judge_memlock(nodes: Mapping[str, NodeFacts], need: int | None) -> list[CheckResult]:
    findings: list[CheckResult] = []
    limits: dict[str, Limit] = {h: n.limits["memlock"] for h, n in nodes.items() if "memlock" in n.limits}
    rdma = {h for h, n in nodes.items() if n.ib_ports}
    short = {h: lim.soft for h, lim in limits.items() if h in rdma and _below(lim.soft, need)}
    for soft, hosts in group_by_value(short):
        findings.append(
            _result(
                "fail",
                f"{fold(hosts)}: the locked-memory limit is {limit_text(soft)}, and RDMA needs "
                f"{limit_text(need)}: NCCL cannot register its buffers with the NIC (ibv_reg_mr fails)",
                hosts,
                MemlockShort(item="memlock", soft=soft, need=need),
            )
        )
    # Without a stated need, the nodes are compared: one node locked down where the others are not.
    compared = {h: lim.soft for h, lim in limits.items() if h not in short}
    groups = group_by_value(compared)
    if len(groups) > 1:
        majority, odd = minority(compared)
        sides = "; ".join(f"{fold(hosts)}: {limit_text(value)}" for value, hosts in groups)
        findings.append(
            _result(
                "warn",
                f"the locked-memory limit differs between nodes: {sides}",
                odd,
                MemlockDiffers(
                    item="memlock", majority=majority, values={limit_text(v): hosts for v, hosts in groups}
                ),
            )
        )
    return findings


def _judge_nofile(nodes: Mapping[str, NodeFacts], need: int) -> list[CheckResult]:
    low = {
        h: (n.limits["nofile"].soft, n.limits["nofile"].hard)
        for h, n in nodes.items()
        if "nofile" in n.limits and _below(n.limits["nofile"].soft, need)
    }
    findings = []
    for (soft, hard), hosts in group_by_value(low):
        raise_to = " (its hard limit allows raising it: ulimit -n)" if not _below(hard, need) else ""
        findings.append(
            _result(
                "warn",
                f"{fold(hosts)}: open files are limited to {soft:,}, below {need:,}: DataLoader workers pass "
                f"tensors as file descriptors and run out{raise_to}",
                hosts,
                NofileLow(item="nofile", soft=soft, hard=hard, need=need),
            )
        )
    return findings


def _rows(nodes: Mapping[str, NodeFacts]) -> dict[str, NodeLimits]:
    rows: dict[str, NodeLimits] = {}
    for host, node in nodes.items():
        row: NodeLimits = {"rdma": bool(node.ib_ports)}
        if node.shm is not None:
            row["shm_bytes"] = node.shm.size_bytes
            row["shm_free_bytes"] = node.shm.free_bytes
        if "memlock" in node.limits:
            row["memlock"] = node.limits["memlock"].soft
        if "nofile" in node.limits:
            row["nofile"] = node.limits["nofile"].soft
            row["nofile_hard"] = node.limits["nofile"].hard
        if node.scratch:
            row["scratch_free_bytes"] = {name: place.free_bytes for name, place in node.scratch.items()}
        rows[host] = row
    return rows


def judge_limits(nodes: Mapping[str, NodeFacts], config: Config) -> list[CheckResult]:
    cfg = config.section(LimitsSection)
    findings = [
        *_judge_shm(nodes, cfg.min_shm_bytes),
        *_judge_memlock(nodes, cfg.rdma_memlock_bytes),
        *_judge_nofile(nodes, cfg.min_nofile),
        *judge_scratch(nodes, cfg.min_scratch_free_bytes, cfg.min_scratch_inodes),
    ]
    silent = sorted(
        (h for h, n in nodes.items() if n.shm is None and not n.limits and not n.scratch), key=natural_key
    )
    details: Rows = {"nodes": _rows(nodes), "not_reported": silent}
    if findings:
        return with_check_details(findings, details)
    if not nodes or len(silent) == len(nodes):
        return [_result("skip", "no node reported its limits", [], details)]
    shm = [n.shm.size_bytes for n in nodes.values() if n.shm is not None]
    memlock = {limit_text(n.limits["memlock"].soft) for n in nodes.values() if "memlock" in n.limits}
    parts = []
    if shm:
        parts.append(f"/dev/shm {capacity(min(shm))} or more")
    if memlock:
        parts.append(f"locked memory {', '.join(sorted(memlock))}")
    nofile = [
        s for n in nodes.values() if "nofile" in n.limits and (s := n.limits["nofile"].soft) is not None
    ]
    if nofile:
        parts.append(f"open files {min(n for n in nofile if n is not None):,} or more")
    if (scratch := least_free(nodes)) is not None:
        parts.append(f"{capacity(scratch)} or more free where the job writes")
    missing = f" ({fold(silent)} did not report them)" if silent else ""
    counted = len(nodes) - len(silent)
    where = f"on all {counted} nodes" if counted > 1 else "on the one node"
    return [_result("pass", f"{', '.join(parts)} {where}{missing}", [], details)]


def _run(ctx: CheckContext) -> list[CheckResult]:
    return judge_limits(ctx.nodes(), ctx.config)


CHECK = Check(
    name=NAME,
    title="/dev/shm, scratch space, locked-memory and open-files limits meet the job's needs and agree "
    "between nodes",
    run=_run,
    presentation=PRESENTATION,
    action="fix_config",
    node_local=True,
    settings=Settings(LimitsSection),
    profiles=PROFILES,
    explains=EXPLAINS,
)
