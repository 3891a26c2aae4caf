"""The ``allreduce`` judge: busbw across the world and between node pairs (as nccl-tests measures
it, judged on the large sizes), slow nodes and links named once a re-test confirms them, and
NCCL's fall-back to TCP. Pure: a job's outcome and the nodes' facts in, findings out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from checks.allreduce.details import NAME, AllreduceDetails, PairTest
from checks.allreduce.nccl_runtime import loaded_nccl_results, loaded_versions
from checks.hardware.counters import growth_results
from checks.job.nccl_log import NcclTransport, parse_nccl_log
from checks.job.node.planning import REPEATS
from checks.job.outcome import JobOutcome, node_names
from checks.job.pairs import PairJudgement, SlowGroup, name_culprits
from checks.job.phase import read_phase
from checks.job.settings import AllreduceSection
from checks.job.stalled_node import attribute_stall, with_loss_cause
from checks.job.stragglers import Straggler, explained_by_stragglers, stragglers_among
from preflight.config import Config
from preflight.model import CheckResult, with_check_details
from preflight.nodeset import fold, group_by_value
from preflight.status import Status, by_severity
from preflight.units import binary_size, gbps, ratio

# A summary names this many pairs before "and N more" (details have them all).
_LISTED_PAIRS = 4


def _name(names: Sequence[str], node: int) -> str:
    return names[node] if 0 <= node < len(names) else f"node rank {node}"


def _link(names: Sequence[str], pair: Sequence[int]) -> str:
    return f"{_name(names, pair[0])}-{_name(names, pair[1])}"


# --------------------------------------------------------------------------- the sweep


def _sweep_results(
    section: Mapping[str, Any], config: Config, world: int, n_nodes: int, backend: str
) -> tuple[list[CheckResult], str | None]:
    """Findings about the whole-world sweep, and the headline for a pass."""
    rows = [r for r in section.get("sweep") or [] if isinstance(r, Mapping)]
    if not rows:
        empty = CheckResult(NAME, "error", "the sweep measured no message size", (), {"item": "no_sweep"})
        return [empty], None
    results: list[CheckResult] = []
    wrong = [r for r in rows if int(r.get("wrong") or 0) > 0]
    if wrong:
        wrong.sort(key=lambda r: -int(r["size_bytes"]))
        first, *others = wrong
        noun = "element" if int(first["wrong"]) == 1 else "elements"
        summary = f"the sweep found {first['wrong']} wrong {noun} at {binary_size(int(first['size_bytes']))}"
        if others:
            more = ", ".join(f"{r['wrong']} at {binary_size(int(r['size_bytes']))}" for r in others[:3])
            summary += f" (and {more})"
        details = {"item": "wrong_sums", "wrong": {str(r["size_bytes"]): r["wrong"] for r in wrong}}
        results.append(
            CheckResult(NAME, "fail", summary + ": all-reduce returned corrupted data", (), details)
        )
    largest = rows[-1]
    size = binary_size(int(largest["size_bytes"]))
    busbw = float(largest["busbw_gbps"])
    floor = config.section(AllreduceSection).min_busbw_gbps
    if floor > 0 and busbw < floor:
        summary = f"busbw {gbps(busbw)} GB/s at {size} is below the floor {floor:g} GB/s"
        floor_details = {"item": "below_floor", "busbw_gbps": busbw, "floor_gbps": floor}
        results.append(CheckResult(NAME, "fail", summary, (), floor_details))
    nodes = f"{n_nodes} node{'s' if n_nodes != 1 else ''}"
    ranks = f"{world} rank{'s' if world != 1 else ''}"
    headline = f"busbw {gbps(busbw)} GB/s at {size} across {nodes} ({ranks}, {backend})"
    if not section.get("sweep_complete", True):
        # Not a finding by itself: a slow network is judged by the floor and by the pairs.
        top = binary_size(int(section.get("sweep_max_bytes") or largest["size_bytes"]))
        budget = float(section.get("sweep_budget_s") or config.section(AllreduceSection).sweep_budget_s)
        headline += f" (the sweep's {budget:g} s budget stopped it short of {top}"
        if _contended(largest):
            waited = float(largest["cpu_wait"])
            headline += f"; its ranks' threads waited {waited:.1f} s for a CPU a second of its ops"
        headline += ")"
    return results, headline


# A sweep that its budget stopped short has stalled when its last op took this long and moved
# under STALLED_SHARE of the typical pair's busbw (without pairs: at a size of at most
# STALLED_BYTES, which any fabric moves in milliseconds: 1 MiB over 1 GbE takes 17 ms).
STALLED_OP_S = 0.1
STALLED_SHARE = 0.01
STALLED_BYTES = 1 << 20


# A sweep row whose ranks' threads waited for a CPU this long a second of its ops (summed over
# threads) measured the nodes' load: ranks that cannot run make every op late, a stalled link
# leaves them blocked on their sockets instead.
CONTENDED_SHARE = 0.25


def _contended(row: Mapping[str, Any]) -> bool:
    """Whether a sweep row's ranks waited for a CPU CONTENDED_SHARE of its ops or more: ranks that
    cannot run (nodes sharing cores, another load) make every op late, a stalled link does not."""
    wait = row.get("cpu_wait")
    return wait is not None and float(wait) >= CONTENDED_SHARE


def stalled_sweep(
    section: Mapping[str, Any], outcome: JobOutcome, typical_gbps: float | None
) -> list[CheckResult]:
    """A failure when the budget stopped the sweep on ops that stalled: the ring across every node
    stalled (a lossy node can do so while its pair tests happen to pass). Named on the node whose
    connections lost the traffic, where the retransmissions say."""
    rows = [r for r in section.get("sweep") or [] if isinstance(r, Mapping)]
    if not rows or section.get("sweep_complete", True):
        return []
    last = rows[-1]
    op_s = float(last.get("time_s") or 0.0)
    busbw = float(last.get("busbw_gbps") or 0.0)
    if typical_gbps:
        crawling = busbw < STALLED_SHARE * typical_gbps
    else:
        crawling = int(last.get("size_bytes") or 0) <= STALLED_BYTES
    if op_s < STALLED_OP_S or not crawling or _contended(last):
        return []
    top = binary_size(int(section.get("sweep_max_bytes") or last["size_bytes"]))
    size = binary_size(int(last["size_bytes"]))
    summary = (
        f"the all-reduce across every node stalled: one op of {size} took {op_s:.2g} s "
        f"(busbw {gbps(float(last['busbw_gbps']))} GB/s), and its budget stopped the sweep short of {top}"
    )
    details = {"item": "stalled_sweep", "op_s": op_s, "size_bytes": int(last["size_bytes"])}
    return [attribute_stall(CheckResult(NAME, "fail", summary, (), details), outcome, NAME)]


# --------------------------------------------------------------------------- pairs


def _hostname(node_facts: Mapping[str, Mapping[str, Any]], name: str) -> str:
    return str((node_facts.get(name) or {}).get("hostname") or "")


def _group_result(
    group: SlowGroup, names: Sequence[str], typical: float, switches: Mapping[str, str]
) -> CheckResult:
    """One finding for a cut between two node sets, naming the switches when a topology says them."""
    left, right = ([_name(names, n) for n in side] for side in group.sides)
    inside = (
        f"inside each group it is normal ({gbps(group.inside_gbps)} GB/s)"
        if group.inside_gbps > 0
        else "inside each group it was not slow"
    )
    where = "a switch uplink or route between them"
    left_switches = sorted({switches[h] for h in left if h in switches})
    right_switches = sorted({switches[h] for h in right if h in switches})
    if switches and len(left_switches) == 1 and left_switches != right_switches:
        where = f"the uplink of switch {left_switches[0]} or the route from it"
    elif switches and len(right_switches) == 1 and left_switches != right_switches:
        where = f"the uplink of switch {right_switches[0]} or the route from it"
    between = f"{fold(left)} and {fold(right)}"
    hosts = (*left, *right)
    if group.cut_off:  # the smaller side against every other node: it is the one to look at
        small, rest = sorted((left, right), key=len)
        between, hosts = f"{fold(small)} and the other {len(rest)} nodes", tuple(small)
    summary = (
        f"traffic between {between} runs at {ratio(group.ratio)} the typical pair "
        f"({gbps(group.busbw_gbps)} vs {gbps(typical)} GB/s busbw over {len(group.pairs)} pairs, "
        f"confirmed by a re-test); {inside}: {where}"
    )
    details = {
        "item": "cut",
        "groups": [left, right],
        "busbw_gbps": group.busbw_gbps,
        "ratio": group.ratio,
        "inside_gbps": group.inside_gbps,
        "pairs": [_link(names, p) for p in group.pairs],
        "switches": [left_switches, right_switches],
        "cut_off": group.cut_off,
    }
    return CheckResult(NAME, "fail", summary, hosts, details)


def _pair_results(
    culprits: PairJudgement, names: Sequence[str], config: Config, switches: Mapping[str, str]
) -> tuple[list[CheckResult], list[str]]:
    """Failures for confirmed slow nodes, slow links and pairs under the floor; notes for a pass."""
    typical = culprits.typical_busbw_gbps
    results: list[CheckResult] = []
    for slow in culprits.slow_nodes:
        host = _name(names, slow.node)
        partners = ", ".join(_name(names, p) for p in slow.partners)
        summary = (
            f"{host} is slow with every partner: {ratio(slow.ratio)} the typical pair "
            f"({gbps(slow.busbw_gbps)} vs {gbps(typical)} GB/s busbw), confirmed by a re-test"
            + (f"; this run's noise ±{culprits.noise * 100:.0f}%" if culprits.noise else "")
        )
        details = {
            "item": "slow_node",
            "node": host,
            "busbw_gbps": slow.busbw_gbps,
            "ratio": slow.ratio,
            "partners": partners,
            "noise": culprits.noise,
        }
        results.append(CheckResult(NAME, "fail", summary, (host,), details))
    for group in culprits.slow_groups:
        results.append(_group_result(group, names, typical, switches))
    for link in culprits.slow_links:
        hosts = (_name(names, link.nodes[0]), _name(names, link.nodes[1]))
        summary = (
            f"the link {hosts[0]}-{hosts[1]} runs at {ratio(link.ratio)} the typical pair "
            f"({gbps(link.busbw_gbps)} vs {gbps(typical)} GB/s busbw) in its test and re-test; "
            "both nodes are fast with other partners"
        )
        details = {
            "item": "slow_link",
            "link": list(hosts),
            "busbw_gbps": link.busbw_gbps,
            "first_gbps": link.first_gbps,
            "retest_gbps": list(link.retest_gbps),
            "ratio": link.ratio,
        }
        results.append(CheckResult(NAME, "fail", summary, hosts, details))
    if culprits.below_floor:
        floor = config.section(AllreduceSection).min_pair_busbw_gbps
        shown = ", ".join(f"{_link(names, p)} {gbps(v)}" for p, v in culprits.below_floor[:_LISTED_PAIRS])
        more = len(culprits.below_floor) - _LISTED_PAIRS
        count = len(culprits.below_floor)
        summary = (
            f"{count} pair{'s' if count > 1 else ''} below the floor {floor:g} GB/s busbw: {shown} GB/s"
            + (f", and {more} more" if more > 0 else "")
        )
        floor_hosts = tuple(dict.fromkeys(_name(names, n) for p, _ in culprits.below_floor for n in p))
        floor_details = {
            "item": "pair_below_floor",
            "floor_gbps": floor,
            "pairs": {_link(names, p): v for p, v in culprits.below_floor},
        }
        results.append(CheckResult(NAME, "fail", summary, floor_hosts, floor_details))
    notes = [
        f"{_link(names, u.nodes)} slow once ({ratio(u.first_gbps / typical if typical else 0.0)}), {u.reason}"
        for u in culprits.unconfirmed
    ]
    noise = f"±{culprits.noise * 100:.0f}%" if culprits.noise else "unmeasured (too few healthy pairs)"
    notes += [
        f"pairs with node {_name(names, w.node)} ran at {ratio(w.ratio)}, "
        f"within this run's noise of {noise}: not named"
        for w in culprits.within_noise
    ]
    return results, notes


def _add_pair_tables(
    details: AllreduceDetails,
    pairs: Sequence[Mapping[str, Any]],
    culprits: PairJudgement,
    names: Sequence[str],
) -> None:
    """The pair tests, their matrix and the typical pair, in ``details`` (after the measurement)."""
    # The script's records as it printed them, but with node names in "nodes" (what a report
    # shows); the job's node ranks are kept in "node_ranks".
    details["pairs"] = [
        cast(
            PairTest,
            {**p, "nodes": [_name(names, int(n)) for n in p["nodes"]], "node_ranks": list(p["nodes"])},
        )
        for p in pairs
    ]
    matrix: dict[str, dict[str, float]] = {}
    for p in pairs:
        if p.get("retest"):
            continue
        a, b = (_name(names, int(n)) for n in p["nodes"])
        matrix.setdefault(a, {})[b] = float(p["busbw_gbps"])
        matrix.setdefault(b, {})[a] = float(p["busbw_gbps"])
    details["pair_matrix"] = matrix
    details["typical_pair_busbw_gbps"] = culprits.typical_busbw_gbps
    details["median_pair_busbw_gbps"] = culprits.median_pair_busbw_gbps
    details["slow_threshold_gbps"] = culprits.threshold_gbps
    details["healthy_pair_busbw_gbps"] = culprits.healthy_median_gbps
    details["healthy_spread_gbps"] = culprits.healthy_spread_gbps
    details["healthy_pairs"] = culprits.healthy_pairs
    details["noise"] = culprits.noise
    details["within_noise"] = {_name(names, w.node): w.ratio for w in culprits.within_noise}
    details["node_ratio"] = {_name(names, n): r for n, r in culprits.node_ratio.items()}
    details["unconfirmed"] = [
        {"link": _link(names, u.nodes), "first_gbps": u.first_gbps, "retest_gbps": list(u.retest_gbps),
         "reason": u.reason}
        for u in culprits.unconfirmed
    ]  # fmt: skip


# --------------------------------------------------------------------------- transport


def _ib_description(facts: Mapping[str, Any]) -> str | None:
    """``InfiniBand mlx5_0`` / ``RoCE mlx5_0, mlx5_1`` from the node's facts; None without IB ports."""
    devices = [d for d in ((facts.get("net") or {}).get("ib_devices") or []) if isinstance(d, Mapping)]
    if not devices:
        return None
    names = list(dict.fromkeys(str(d.get("name")) for d in devices))
    layers = {str(d.get("link_layer") or "") for d in devices}
    kind = "RoCE" if layers == {"Ethernet"} else "InfiniBand"
    down = [str(d.get("name")) for d in devices if str(d.get("state") or "").upper() not in ("", "ACTIVE")]
    state = f" ({', '.join(down)} not active)" if down and len(down) == len(devices) else ""
    return f"{kind} {', '.join(names[:3])}{state}"


def _transport_results(
    transports: Mapping[str, NcclTransport],
    outcome: JobOutcome,
    config: Config,
    node_facts: Mapping[str, Mapping[str, Any]],
    n_nodes: int,
    gpu: bool,
) -> tuple[list[CheckResult], str | None]:
    """Fall-back to TCP where IB was expected, IB without GPUDirect RDMA, NCCL warnings."""
    logged = {host: t for host, t in transports.items() if t.nccl_lines}
    if outcome.backend != "nccl" or not logged:
        return [], None
    results: list[CheckResult] = []
    expect = config.section(AllreduceSection).expect_transport
    if n_nodes >= 2 and expect != "socket":
        fallbacks: dict[str, str] = {}
        for host, transport in logged.items():
            if not transport.uses_socket:
                continue
            described = _ib_description(node_facts.get(host) or {})
            if described is not None:
                fallbacks[host] = f"where {described} exists"
            elif expect == "ib":
                fallbacks[host] = 'where [allreduce] expect_transport = "ib"'
        for reason, hosts in group_by_value(fallbacks):
            summary = f"NCCL used NET/Socket between nodes on {fold(hosts)} {reason}: fall-back to TCP"
            fallback_details: dict[str, Any] = {
                "item": "nccl_socket_fallback",
                "fallback": {h: logged[h].to_dict() for h in hosts},
            }
            results.append(CheckResult(NAME, "fail", summary, tuple(hosts), fallback_details))
    if gpu and n_nodes >= 2:
        no_gdr = [h for h, t in logged.items() if t.rdma_channels and not t.gdrdma]
        if no_gdr:
            networks = ", ".join(dict.fromkeys(n for h in no_gdr for n in logged[h].rdma_channels))
            summary = (
                f"NCCL used {networks} without GPUDirect RDMA on {fold(no_gdr)}: data between GPU and NIC "
                "is staged through host memory (is nvidia-peermem loaded?)"
            )
            results.append(CheckResult(NAME, "warn", summary, tuple(no_gdr), {"item": "no_gpudirect_rdma"}))
    warned = {h: t.warnings[0] for h, t in logged.items() if t.warnings}
    for warning, hosts in group_by_value(warned):
        count = sum(logged[h].warning_count for h in hosts)
        summary = f"NCCL warned on {fold(hosts)}: {warning}" + (f" ({count} warnings)" if count > 1 else "")
        details = {"item": "nccl_warning", "warnings": {h: list(logged[h].warnings) for h in hosts}}
        results.append(CheckResult(NAME, "warn", summary, tuple(hosts), details))
    used = {h: t.inter_node or "no network connection" for h, t in logged.items()}
    transports_seen = [value for value, _ in group_by_value(used)]
    headline = f"NCCL over {', '.join(transports_seen)}" + (
        " with GPUDirect RDMA" if all(t.gdrdma for t in logged.values()) and gpu and n_nodes >= 2 else ""
    )
    return results, headline


def transport_text(transport: NcclTransport) -> str:
    """One line per node for a report: ``NET/IB with GDRDMA (mlx5_0:1/IB, mlx5_1:1/RoCE), NCCL 2.21.5``;
    ``no network connection (NCCL chose IB)`` where no connection line crossed the network."""
    used = transport.inter_node or "no network connection"
    if transport.inter_node is None and transport.network:
        used += f" (NCCL chose {transport.network})"
    parts = [used + (" with GDRDMA" if transport.gdrdma else "")]
    devices = transport.socket_devices if used == "NET/Socket" else transport.ib_devices
    if used.startswith("NET/") and devices:
        shown = [f"{d.name}:{d.port}/{d.link_layer}" if d.port is not None else d.name for d in devices[:4]]
        parts[0] += f" ({', '.join(shown)})"
    if transport.version:
        parts.append(f"NCCL {transport.version}")
    return ", ".join(parts)


def _straggler_results(
    stragglers: Sequence[Straggler], names: Sequence[str], slow_ratio: float
) -> list[CheckResult]:
    """A small cluster's stragglers (checks.job.stragglers): a warn, or a fail under the slow ratio,
    with both measurements and the run's own noise."""
    results: list[CheckResult] = []
    for straggler in stragglers:
        host = _name(names, straggler.node)
        summary = (
            f"{host} is slow with every partner: {ratio(straggler.ratio)} the pairs without it "
            f"({gbps(straggler.busbw_gbps)} vs "
            f"{gbps(straggler.healthy_gbps)} GB/s busbw over {straggler.tests} and {straggler.healthy_tests} "
            f"tests; each pair tested {REPEATS + 1} times, its own noise ±{gbps(straggler.noise_gbps)} GB/s)"
        )
        details = {
            "item": "straggler",
            "busbw_gbps": straggler.busbw_gbps,
            "healthy_gbps": straggler.healthy_gbps,
            "ratio": straggler.ratio,
            "noise_gbps": straggler.noise_gbps,
            "tests": straggler.tests,
            "healthy_tests": straggler.healthy_tests,
        }
        status: Status = "fail" if straggler.ratio < slow_ratio else "warn"
        results.append(CheckResult(NAME, status, summary, (host,), details))
    return results


def _judge_pairs(
    pairs: Sequence[Mapping[str, Any]],
    names: Sequence[str],
    config: Config,
    node_facts: Mapping[str, Mapping[str, Any]],
) -> tuple[PairJudgement, list[CheckResult], list[str], str]:
    """The pair tests judged: the culprits (less the links a straggler explains), their findings,
    the notes on pairs slow once, and the headline for a pass."""
    cfg = config.section(AllreduceSection)
    culprits = name_culprits(pairs, len(names), cfg.slow_ratio, cfg.min_pair_busbw_gbps, cfg.quiet_slow_ratio)
    stragglers = stragglers_among(pairs, culprits)
    culprits = explained_by_stragglers(culprits, stragglers)
    switches = {
        name: switch
        for name in names
        if (switch := config.switch_of.get(name) or config.switch_of.get(_hostname(node_facts, name)))
    }
    findings, notes = _pair_results(culprits, names, config, switches)
    findings += _straggler_results(stragglers, names, cfg.slow_ratio)
    ratios = list(culprits.node_ratio.values()) or [0.0]
    first = [p for p in pairs if not p.get("retest")]
    headline = (
        f"{len(first)} pairs, nodes at {min(ratios):.2g}-{max(ratios):.2g}x of a typical pair "
        f"({gbps(culprits.typical_busbw_gbps)} GB/s)"
    )
    return culprits, findings, notes, headline


def _details(
    section: Mapping[str, Any],
    outcome: JobOutcome,
    world: int,
    names: Sequence[str],
    transports: Mapping[str, NcclTransport],
    judged: tuple[Sequence[Mapping[str, Any]], PairJudgement | None],
    nccl_loaded: Mapping[str, str],
    notes: Sequence[str],
) -> AllreduceDetails:
    """The first finding's details: the sweep, the pair tables, NCCL's transport, the notes."""
    pairs, culprits = judged
    details: AllreduceDetails = {
        "sweep": list(section.get("sweep") or []),
        "sweep_complete": section.get("sweep_complete"),
        "duration_s": section.get("duration_s"),
        "world_size": world,
        "backend": outcome.backend,
        "nodes": list(names),
    }
    if culprits is not None:
        _add_pair_tables(details, pairs, culprits, names)
        if isinstance(section.get("pair_seed"), int):
            details["pair_seed"] = section["pair_seed"]
    details["transport"] = {h: transport_text(t) for h, t in transports.items() if t.nccl_lines}
    details["transport_details"] = {h: t.to_dict() for h, t in transports.items() if t.nccl_lines}
    if nccl_loaded:
        details["nccl_loaded"] = dict(nccl_loaded)
    if notes:
        details["notes"] = list(notes)
    return details


# --------------------------------------------------------------------------- the judge


def judge_allreduce(
    outcome: JobOutcome, config: Config, node_facts: Mapping[str, Mapping[str, Any]]
) -> list[CheckResult]:
    """Findings for the all-reduce phase of a job: sweep, pairs, transport, and the nodes that failed."""
    phase = read_phase(NAME, outcome, {"duration_s": outcome.duration_s})
    # The fabric's error counters that grew while the job ran: judged here, where the traffic is,
    # and by no other check of the job.
    grown = growth_results(outcome, NAME)
    if phase.section is None:
        return phase.findings + grown
    results, section, document = phase.findings + grown, phase.section, phase.document
    names = node_names(outcome)
    # Parsed when the job ended, from all of each node's stderr that was kept (the stored copy
    # is cut shorter); a recorded outcome without it is parsed from what it stored.
    transports = {n.host: n.nccl or parse_nccl_log(n.stderr) for n in outcome.nodes}

    world = int(document.get("world_size") or 0)
    gpu = document.get("device") == "cuda"
    n_nodes = len(names)
    sweep_findings, headline = _sweep_results(section, config, world, n_nodes, outcome.backend)
    results.extend(sweep_findings)

    pairs = [p for p in section.get("pairs") or [] if isinstance(p, Mapping)]
    culprits: PairJudgement | None = None
    notes: list[str] = []
    pair_headline = None
    if pairs:
        culprits, pair_findings, notes, pair_headline = _judge_pairs(pairs, names, config, node_facts)
        results.extend(with_loss_cause(r, outcome, NAME) for r in pair_findings)
    if not any(r.status == "fail" and r.hosts for r in results):
        results.extend(stalled_sweep(section, outcome, culprits.typical_busbw_gbps if culprits else None))
    if n_nodes == 2 and headline:
        # One pair: no rule here can say which side is slow; the history compares it with its past.
        headline += "; two nodes are one pair, so which of them is slow cannot be told from this run alone"

    transport_findings, transport_headline = _transport_results(
        transports, outcome, config, node_facts, n_nodes, gpu
    )
    results.extend(transport_findings)
    nccl_loaded = loaded_versions(document, names)
    results.extend(loaded_nccl_results(nccl_loaded))
    for why, hosts in group_by_value(outcome.untested_gpus):
        results.append(
            CheckResult(NAME, "warn", f"{fold(hosts)}: {why}", tuple(hosts), {"item": "untested_gpus"})
        )

    details = _details(section, outcome, world, names, transports, (pairs, culprits), nccl_loaded, notes)
    if world == 1 and not any(r.status in ("fail", "error") for r in results):
        # busbw is 0 by definition for one rank: there is no traffic to measure.
        sweep = details["sweep"]
        top = binary_size(int(sweep[-1]["size_bytes"])) if sweep else "?"
        summary = f"one rank only: no all-reduce traffic to measure (results checked up to {top})"
        return [CheckResult(NAME, "skip", summary, (), {**details, "item": "one_rank"})]
    if not any(r.status in ("fail", "error") for r in results):
        parts = [p for p in (headline, pair_headline, transport_headline) if p]
        summary = "; ".join(parts)
        if notes:
            summary += (
                f"; {len(notes)} pair{'s' if len(notes) > 1 else ''} slow once, not confirmed ({notes[0]})"
            )
        results.append(CheckResult(NAME, "pass", summary, (), details))
        return results
    # "pairs" is every pair test, which the measures, the chart and baseline read; a cut's own
    # pairs follow from its groups, a floor finding's from the tests under its floor_gbps.
    return with_check_details(by_severity(results), details, kept=("pairs",))
