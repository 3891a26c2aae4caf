"""The rails phase: each rail between two nodes all-reduced on its own. A rail is one path a node's
traffic takes to the fabric. On GPU nodes it is a GPU's rank and the NIC NCCL pairs with it (the
nearest one: on rail-optimised nodes, the rail's own HCA): local rank r of one node with local rank
r of another, every rail at once, as training drives them. On CPU nodes it is each interface of the
node's list (``[rails] interfaces``, else GLOO_SOCKET_IFNAME when it names several), each test's
group bound to its interface: local rank r carries rail r where nodes have a rank for each, at
once, else a node's first rank carries them all, one after another.

The pair tests all-reduce over all of a node's NICs at once, so a node with one slow card reads as
a node a little slow, or not at all; here each node's rails are tested with its two neighbours in a
ring, at the pair message (bandwidth) and at a few bytes (latency), a rail slow in its test is tested
again, and the judge (``checks.rails``) names the card.
"""

from __future__ import annotations

import os
import time
from typing import TYPE_CHECKING, Any

from checks.job.node.harness import Settings
from checks.job.node.pair_tests import PairTests, next_round
from checks.job.node.planning import pack_rounds
from checks.job.node.rail_speeds import best_busbw, rail_tests, slow_tests

if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from checks.job.node.harness import Job

    JsonDict = dict[str, Any]
    RailTest = tuple[int, int, int]

# A CPU node's interfaces tested at most (the launcher's budget counts this many rails).
MAX_CPU_RAILS = 4
# A rail's latency: an all-reduce this small (nccl-tests' smallest, two floats; NCCL's low-latency
# protocol), timed over up to this many ops within the test's budget.
LATENCY_BYTES = 8
LATENCY_ITERS = 100


def interfaces(configured: Sequence[str]) -> list[str]:
    """A CPU node's rails: the configured interfaces, else GLOO_SOCKET_IFNAME's when it names
    several (a node that reaches its peers through one interface has one rail)."""
    if configured:
        return [str(name) for name in configured][:MAX_CPU_RAILS]
    named = [name.strip() for name in os.environ.get("GLOO_SOCKET_IFNAME", "").split(",") if name.strip()]
    return named[:MAX_CPU_RAILS] if len(named) > 1 else []


def gpu_address(job: Job) -> str | None:
    """The PCI address of this rank's GPU as NVML and nvidia-smi write it, and so the node's facts
    ("00000000:18:00.0"); None where torch does not say (older builds)."""
    props = job.torch.cuda.get_device_properties(job.device)
    parts = [getattr(props, name, None) for name in ("pci_domain_id", "pci_bus_id", "pci_device_id")]
    if not all(isinstance(part, int) for part in parts):
        return None
    domain, bus, device = parts
    return f"{domain:08X}:{bus:02X}:{device:02X}.0"


def _rails_of(job: Job, cards: Sequence[Mapping[str, Any]]) -> int:
    """The rails every node has: GPU ranks a node, or the interfaces CPU nodes listed."""
    if job.cuda:
        return min(len(ranks) for ranks in job.ranks_of_node.values())
    listed: dict[int, int] = {}
    for card in cards:
        listed[int(card["node_rank"])] = len(card.get("interfaces") or [])
    return min(listed.get(node, 0) for node in job.ranks_of_node)


def run(job: Job) -> JsonDict:
    """Each rail of each ring pair, tested and (when slow) tested again; what each rail is."""
    settings = job.settings("rails")
    start = time.perf_counter()
    mine = interfaces(settings["interfaces"]) if not job.cuda else []
    card: JsonDict = {"rank": job.rank, "node_rank": job.node_rank, "local_rank": job.local_rank}
    if job.cuda:
        card["gpu"] = gpu_address(job)
    else:
        card["interfaces"] = mine
    cards = job.gather(card)
    rails = _rails_of(job, cards)
    result: JsonDict = {"rails": rails, "cards": cards, "tests": []}
    pairs = [tuple(pair) for pair in settings["pairs"]]
    if len(job.ranks_of_node) < 2 or not pairs:
        result["skipped"] = "one node: no rail between nodes to test"
    elif rails < 2:
        result["skipped"] = (
            "one GPU a node: the pair tests measure its one rail"
            if job.cuda
            else "each node reaches its peers through one interface (name two or more in [rails] "
            "interfaces, or in GLOO_SOCKET_IFNAME): the pair tests measure it"
        )
    else:
        result["tests"] = _test_rails(job, settings, pairs, rails, mine)
    result["duration_s"] = time.perf_counter() - start
    return result


def _test_rails(
    job: Job, settings: Settings, pairs: Sequence[Sequence[int]], rails: int, mine: Sequence[str]
) -> list[JsonDict]:
    """Every rail of every pair at the pair message (bandwidth), then at LATENCY_BYTES (latency,
    marked ``latency``), the slow ones again after each (held to the first tests' healthy rail).
    Rail r is local rank r where every node has a rank for each rail (GPU nodes; CPU nodes with
    as many ranks as interfaces), and the rails run at once; otherwise a node's first rank carries
    every rail, one after another."""
    spread = min(len(ranks) for ranks in job.ranks_of_node.values()) >= rails

    def members(test: tuple[int, ...]) -> list[int]:
        local = test[2] if spread else 0
        return sorted((job.ranks_of_node[test[0]][local], job.ranks_of_node[test[1]][local]))

    def environment(test: tuple[int, ...]) -> dict[str, str]:
        return {} if job.cuda else {"GLOO_SOCKET_IFNAME": mine[test[2]]}

    tests = PairTests(job, members, environment)
    planned = rail_tests(pairs, rails)
    small = Settings(
        f"{settings.where} at {LATENCY_BYTES} bytes",
        {**settings.values, "pair_bytes": LATENCY_BYTES, "iters": LATENCY_ITERS},
    )
    measured: list[JsonDict] = []
    for sized, latency in ((settings, False), (small, True)):
        found = tests.run(pack_rounds(planned, members), sized, next_round(measured), retest=False)
        again = slow_tests(best_busbw(found), float(settings["slow_ratio"]))
        if again:
            # CPU ranks sharing cores slow each other by the scheduler's luck: their re-tests run
            # each alone (PairTests.run's in_turn_s); GPU rails again all at once.
            alone_s = 0.0 if job.cuda else len(again) * (float(settings["pair_budget_s"]) + 1) + 1
            rounds = pack_rounds(again, members)
            found += tests.run(rounds, sized, next_round(measured + found), retest=True, in_turn_s=alone_s)
        measured += [dict(m, latency=True) if latency else m for m in found]
    tests.destroy()
    return measured
