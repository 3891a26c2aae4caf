"""The culprit search at scale, by simulation: the job's own planner and the judge's own naming, fed
simulated pair bandwidths instead of all-reduces (no SSH, no torch).

Per trial: slow nodes and slow links are injected at random; the first wave is ``plan_rounds`` with
the mode the launcher picks; the re-test wave is ``retest_plan`` on the first wave's results, as
every rank computes it in the job; ``name_culprits`` judges all the measurements. A pair runs at
its slower node's rate, capped by its link, times noise. Prints a Markdown table per cluster size.

    .venv/bin/python benchmarks/culprit_simulation.py
    .venv/bin/python benchmarks/culprit_simulation.py --nodes 64 256 --slow-links 4 --noise 0.3
    .venv/bin/python benchmarks/culprit_simulation.py --grid --trials 40

``--grid`` runs the grid of conditions a real fabric has (GRID_NOISE x GRID_FACTORS x GRID_SLOW_NODES x
GRID_NODES, 2 slow links; and GRID_NOISE x GRID_FACTORS on GRID_SMALL_NODES, one slow node; 200 trials
per cell unless --trials says otherwise, seed 3) and prints it as one Markdown table. On a small
cluster where a pair read slow, every pair is tested again (``repeat_plan``) and
``name_stragglers`` judges the repeats, as the job and the judge do.
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from checks.job.node.planning import repeat_plan
from checks.job.pairs import (
    QUIET_SLOW_RATIO,
    SPREAD_SIGMAS,
    Pair,
    first_busbw,
    name_culprits,
    pair_key,
    plan_mode,
    plan_rounds,
    retest_plan,
    side_plan,
)
from checks.job.settings import AllreduceSection
from checks.job.stragglers import explained_by_stragglers, stragglers_among

DEFAULT_NODES = (64, 256, 1024, 4096)
DEFAULT_SEED = 1
HEALTHY_GBPS = 46.0
# Seconds of one round: the pairs of a round run at once, each within the pair budget.
ROUND_S = AllreduceSection().pair_budget_s


@dataclass(frozen=True)
class Faults:
    """What is injected in every trial, and how noisy a measurement is."""

    slow_nodes: int = 2
    slow_node_factor: float = 0.1
    slow_links: int = 2
    slow_link_factor: float = 0.2
    noise: float = 0.15  # each measurement times a uniform factor in [1 - noise, 1 + noise]
    # Groups of group_size nodes whose every path to a node outside the group runs at cut_factor
    # (a bad uplink). "blocks": consecutive nodes (a leaf switch the inventory lists together);
    # "strided": every (n / group_size)-th node (an inventory that lists one node of each rack in
    # turn; with group_size n/2, the odd against the even positions).
    cut_groups: int = 0
    group_size: int = 4
    cut_factor: float = 0.01
    cut_shape: Literal["blocks", "strided"] = "blocks"
    healthy_gbps: float = HEALTHY_GBPS
    # Slow links anywhere among all pairs (a fault nobody knows the place of), or only on pairs
    # the first wave tests (what the plan can find at best).
    links_on_plan: bool = False

    def describe(self) -> str:
        where = "on first-wave pairs" if self.links_on_plan else "on any pair"
        shape = "consecutive" if self.cut_shape == "blocks" else "strided"
        cuts = (
            f"{self.cut_groups} groups of {self.group_size} {shape} nodes cut off from the rest at "
            f"{self.cut_factor:g}x, "
            if self.cut_groups
            else ""
        )
        return (
            f"{cuts}{self.slow_nodes} slow nodes at {self.slow_node_factor:g}x and "
            f"{self.slow_links} slow links at {self.slow_link_factor:g}x ({where}), "
            "none sharing a node with a slow node or a group; "
            f"noise ±{self.noise * 100:g}% per measurement around a healthy {self.healthy_gbps:g} GB/s"
        )


@dataclass(frozen=True)
class Cluster:
    """The injected faults of one trial: node -> rate factor, pair -> capacity factor."""

    n_nodes: int
    slow_nodes: dict[int, float]
    slow_links: dict[Pair, float]
    cut_groups: tuple[frozenset[int], ...] = ()
    cut_factor: float = 1.0

    def capacity(self, a: int, b: int) -> float:
        """The factor of the path between a and b: its link's, or its cut's."""
        factor = self.slow_links.get(pair_key(a, b), 1.0)
        for group in self.cut_groups:
            if (a in group) != (b in group):
                factor = min(factor, self.cut_factor)
        return factor


@dataclass(frozen=True)
class Trial:
    """One simulated job and what the judge named."""

    seed: str
    first_rounds: int
    retest_rounds: int
    tests: int
    slow_nodes: frozenset[int]
    slow_links: frozenset[Pair]
    links_tested: int  # injected slow links that the first wave tested
    retests: tuple[Pair, ...]  # the re-test wave's pairs
    named_nodes: frozenset[int]
    named_links: frozenset[Pair]
    cut_groups: frozenset[frozenset[int]] = frozenset()
    # Each named group as its smaller side (the group cut off from the rest).
    named_groups: frozenset[frozenset[int]] = frozenset()

    @property
    def rounds(self) -> int:
        return self.first_rounds + self.retest_rounds

    @property
    def exact(self) -> bool:
        return (
            self.named_nodes == self.slow_nodes
            and self.named_links == self.slow_links
            and self.named_groups == self.cut_groups
        )

    @property
    def false_groups(self) -> frozenset[frozenset[int]]:
        return self.named_groups - self.cut_groups

    @property
    def false_nodes(self) -> frozenset[int]:
        return self.named_nodes - self.slow_nodes

    @property
    def false_links(self) -> frozenset[Pair]:
        return self.named_links - self.slow_links

    @property
    def false_culprits(self) -> int:
        return len(self.false_nodes) + len(self.false_links) + len(self.false_groups)


def launcher_mode(n_nodes: int) -> Literal["full", "sparse"]:
    """The plan the launcher asks for (``checks.job.launch``): every pair up to 16 nodes, one round beyond."""
    return plan_mode(n_nodes)


def inject(n_nodes: int, first_wave: Sequence[Sequence[Pair]], faults: Faults, rng: random.Random) -> Cluster:
    """Groups cut off from the rest, then slow nodes outside them, then slow links on distinct pairs that
    touch no slow node or group (a link at a slow node is explained by the node, and could never be
    named)."""
    blocks = n_nodes // faults.group_size if faults.cut_groups else 0
    if faults.cut_groups > blocks or (faults.cut_groups and faults.cut_groups * 2 > blocks):
        raise SystemExit(f"{n_nodes} nodes cannot hold {faults.cut_groups} groups of {faults.group_size}")
    stride = n_nodes // faults.group_size if faults.cut_shape == "strided" else 1
    groups = tuple(
        frozenset(
            range(block, block + stride * faults.group_size, stride)
            if faults.cut_shape == "strided"
            else range(block * faults.group_size, (block + 1) * faults.group_size)
        )
        for block in sorted(rng.sample(range(blocks), faults.cut_groups))
    )
    in_groups = set().union(*groups) if groups else set()
    free = [n for n in range(n_nodes) if n not in in_groups]
    healthy = len(free) - faults.slow_nodes
    if faults.slow_nodes > len(free) or (faults.slow_links and healthy < 2):
        raise SystemExit(f"{n_nodes} nodes cannot hold {faults.slow_nodes} slow nodes and slow links")
    slow_nodes = sorted(rng.sample(free, faults.slow_nodes))
    slow_set = set(slow_nodes) | in_groups
    links: list[Pair] = []
    if faults.links_on_plan:
        candidates = [p for pairs in first_wave for p in pairs if not slow_set & set(p)]
        if len(candidates) < faults.slow_links:
            raise SystemExit(f"the first wave at {n_nodes} nodes has too few pairs for the slow links")
        links = rng.sample(candidates, faults.slow_links)
    else:
        if faults.slow_links > healthy * (healthy - 1) // 2:
            raise SystemExit(f"{n_nodes} nodes have too few healthy pairs for {faults.slow_links} slow links")
        chosen: set[Pair] = set()
        while len(links) < faults.slow_links:
            a, b = rng.sample(free, 2)
            pair = pair_key(a, b)
            if pair not in chosen and not slow_set & {a, b}:
                chosen.add(pair)
                links.append(pair)
    return Cluster(
        n_nodes,
        {node: faults.slow_node_factor for node in slow_nodes},
        {pair: faults.slow_link_factor for pair in sorted(links)},
        groups,
        faults.cut_factor,
    )


def measure(
    cluster: Cluster,
    rounds: Iterable[Sequence[Pair]],
    first_round: int,
    retest: bool,
    faults: Faults,
    rng: random.Random,
) -> list[dict[str, Any]]:
    """The records the job would return for these rounds: its keys, simulated busbw."""
    records: list[dict[str, Any]] = []
    for index, pairs in enumerate(rounds):
        for a, b in pairs:
            rate = faults.healthy_gbps * min(cluster.slow_nodes.get(a, 1.0), cluster.slow_nodes.get(b, 1.0))
            capacity = faults.healthy_gbps * cluster.capacity(a, b)
            busbw = min(rate, capacity) * (1 + rng.uniform(-faults.noise, faults.noise))
            records.append(
                {"round": first_round + index, "nodes": [a, b], "busbw_gbps": busbw, "retest": retest}
            )
    return records


def _group_named(
    sides: tuple[tuple[int, ...], tuple[int, ...]], injected: Iterable[frozenset[int]]
) -> frozenset[int]:
    """The side of a named cut that is an injected group, else its smaller side."""
    for side in sides:
        if frozenset(side) in injected:
            return frozenset(side)
    return frozenset(min(sides, key=len))


def run_trial(
    n_nodes: int,
    faults: Faults,
    slow_ratio: float,
    seed: str,
    quiet_ratio: float = QUIET_SLOW_RATIO,
    inventory_plan: bool = False,
) -> Trial:
    """One job on a cluster with random faults: first wave (its partners drawn per run, as the
    launcher draws them, or in the inventory's order), the job's re-tests, the judge's names."""
    rng = random.Random(seed)
    plan_seed = None if inventory_plan else rng.randrange(1, 2**31)
    first_wave = plan_rounds(n_nodes, launcher_mode(n_nodes), seed=plan_seed)
    cluster = inject(n_nodes, first_wave, faults, rng)
    records = measure(cluster, first_wave, 0, False, faults, rng)
    # What every rank computes in the job from the first wave's measurements.
    retests = retest_plan(first_busbw(records), slow_ratio, quiet_ratio)
    records += measure(cluster, retests, len(first_wave), True, faults, rng)
    if retests:  # then the nodes that still look slow, with each other
        sides = side_plan(records, slow_ratio, quiet_ratio)
        records += measure(cluster, sides, len(first_wave) + len(retests), True, faults, rng)
        retests = retests + sides
    # A small cluster where a pair read slow: every pair again (the job's repeat_plan).
    repeats = repeat_plan(first_busbw(records))
    next_round = len(first_wave) + len(retests)
    records += [{**r, "repeat": True} for r in measure(cluster, repeats, next_round, True, faults, rng)]
    retests = retests + repeats
    culprits = name_culprits(records, n_nodes, slow_ratio, quiet_ratio=quiet_ratio)
    found = stragglers_among(records, culprits)
    culprits = explained_by_stragglers(culprits, found)
    planned = {p for pairs in first_wave for p in pairs}
    return Trial(
        seed=seed,
        first_rounds=len(first_wave),
        retest_rounds=len(retests),
        tests=len(records),
        slow_nodes=frozenset(cluster.slow_nodes),
        slow_links=frozenset(cluster.slow_links),
        links_tested=len(planned & set(cluster.slow_links)),
        retests=tuple(p for pairs in retests for p in pairs),
        named_nodes=frozenset(s.node for s in culprits.slow_nodes) | {s.node for s in found},
        named_links=frozenset(link.nodes for link in culprits.slow_links),
        cut_groups=frozenset(cluster.cut_groups),
        named_groups=frozenset(_group_named(g.sides, cluster.cut_groups) for g in culprits.slow_groups),
    )


def trial_seed(seed: int, n_nodes: int, trial: int) -> str:
    """A string seed per trial (hashed stably by ``random``): any single trial can be replayed."""
    return f"{seed}:{n_nodes}:{trial}"


def simulate(
    n_nodes: int,
    trials: int,
    faults: Faults,
    slow_ratio: float = 0.5,
    seed: int = DEFAULT_SEED,
    quiet_ratio: float = QUIET_SLOW_RATIO,
    inventory_plan: bool = False,
) -> list[Trial]:
    seeds = [trial_seed(seed, n_nodes, t) for t in range(trials)]
    return [run_trial(n_nodes, faults, slow_ratio, s, quiet_ratio, inventory_plan) for s in seeds]


def default_trials(n_nodes: int) -> int:
    """2,000 trials at 64 nodes down to 250 at 4,096 (a trial costs about its node count)."""
    return max(20, min(2000, round(2000 * math.sqrt(64 / n_nodes))))


# --------------------------------------------------------------------------- the table


def _share(part: int, whole: int) -> str:
    if not whole:
        return "-"
    percent = 100 * part / whole
    return f"{percent:.1f}%" if 0 < percent < 1 or 99 < percent < 100 else f"{percent:.0f}%"


def _spread(values: Sequence[int]) -> str:
    low, high = min(values), max(values)
    return str(low) if low == high else f"{statistics.mean(values):.1f} ({low}-{high})"


def table_row(n_nodes: int, trials: Sequence[Trial], round_s: float) -> str:
    rounds = [t.rounds for t in trials]
    injected_nodes = sum(len(t.slow_nodes) for t in trials)
    injected_links = sum(len(t.slow_links) for t in trials)
    injected_groups = sum(len(t.cut_groups) for t in trials)
    named = sum(len(t.named_nodes) + len(t.named_links) + len(t.named_groups) for t in trials)
    cells = [
        f"{n_nodes:,}",
        launcher_mode(n_nodes),
        str(len(trials)),
        f"{_spread([t.first_rounds for t in trials])} + {_spread([t.retest_rounds for t in trials])}",
        f"{statistics.mean(t.tests for t in trials):,.0f}",
        f"{statistics.mean(rounds) * round_s:.0f} s (max {max(rounds) * round_s:.0f} s)",
        _share(sum(len(t.named_nodes & t.slow_nodes) for t in trials), injected_nodes),
        _share(sum(t.links_tested for t in trials), injected_links),
        _share(sum(len(t.named_links & t.slow_links) for t in trials), injected_links),
        _share(sum(len(t.named_groups & t.cut_groups) for t in trials), injected_groups),
        _share(sum(t.exact for t in trials), len(trials)),
        f"{statistics.mean(t.false_culprits for t in trials):.3f}",
        _share(named - sum(t.false_culprits for t in trials), named),
    ]
    return "| " + " | ".join(cells) + " |"


HEADER = (
    "| nodes | plan | trials | rounds: first + re-test | pair tests | time at {round_s:g} s/round "
    "| slow nodes named | slow links tested | slow links named | cut groups named | exact "
    "| false culprits/run | precision |\n"
    "|---:|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"
)


GRID_NOISE = (0.05, 0.10, 0.15, 0.30)
GRID_FACTORS = (0.6, 0.7, 0.8, 0.9)
GRID_SLOW_NODES = (2, 8)
GRID_NODES = (64, 256)
# Small clusters (the fine-tuning runs of two to four machines): one slow node, no slow link.
GRID_SMALL_NODES = (2, 3, 4)
GRID_TRIALS = 200
GRID_SEED = 3
# Recall is asked for where a slow node's slowdown is more than this many times the noise.
GRID_SEPARABLE = 3.0

GRID_HEADER = (
    "| noise | slow nodes | nodes | slowdown over 3x noise | slow nodes named | runs naming every slow node "
    "| false culprits/run | precision | rounds: first + re-test | time at {round_s:g} s/round |\n"
    "|---:|---|---:|---|---:|---:|---:|---:|---|---|"
)


def separable(faults: Faults) -> bool:
    """Whether the slow nodes' slowdown exceeds GRID_SEPARABLE times the noise."""
    return 1 - faults.slow_node_factor > GRID_SEPARABLE * faults.noise + 1e-9


def grid_row(n_nodes: int, faults: Faults, trials: Sequence[Trial], round_s: float) -> str:
    rounds = [t.rounds for t in trials]
    injected = sum(len(t.slow_nodes) for t in trials)
    named = sum(len(t.named_nodes) + len(t.named_links) + len(t.named_groups) for t in trials)
    false = sum(t.false_culprits for t in trials)
    cells = [
        f"{faults.noise * 100:g}%",
        f"{faults.slow_nodes} at {faults.slow_node_factor:g}x",
        f"{n_nodes:,}",
        "yes" if separable(faults) else "no",
        _share(sum(len(t.named_nodes & t.slow_nodes) for t in trials), injected),
        _share(sum(t.slow_nodes <= t.named_nodes for t in trials), len(trials)),
        f"{false / len(trials):.3f}",
        _share(named - false, named),
        f"{_spread([t.first_rounds for t in trials])} + {_spread([t.retest_rounds for t in trials])}",
        f"{statistics.mean(rounds) * round_s:.0f} s (max {max(rounds) * round_s:.0f} s)",
    ]
    return "| " + " | ".join(cells) + " |"


def grid_faults(base: Faults) -> list[Faults]:
    """The grid's conditions: ``base`` with each noise, slow factor and count of slow nodes."""
    return [
        replace(base, noise=noise, slow_node_factor=factor, slow_nodes=count)
        for noise in GRID_NOISE
        for count in GRID_SLOW_NODES
        for factor in GRID_FACTORS
    ]


def small_grid_faults(base: Faults) -> list[Faults]:
    """The small clusters' conditions: one slow node at each noise and slow factor, no slow link."""
    return [
        replace(base, noise=noise, slow_node_factor=factor, slow_nodes=1, slow_links=0)
        for noise in GRID_NOISE
        for factor in GRID_FACTORS
    ]


def print_grid(args: argparse.Namespace, base: Faults) -> None:
    """The grid as one Markdown table, a row per condition and cluster size."""
    trials_per_cell = args.trials or GRID_TRIALS
    default = args.nodes == list(DEFAULT_NODES)
    nodes = list(GRID_NODES) if default else [n for n in args.nodes if n not in GRID_SMALL_NODES]
    small = list(GRID_SMALL_NODES) if default else [n for n in args.nodes if n in GRID_SMALL_NODES]
    cells = [(f, n) for f in grid_faults(base) for n in nodes]
    cells += [(f, n) for f in small_grid_faults(base) for n in small]
    print(GRID_HEADER.format(round_s=args.round_s))
    for faults, n_nodes in cells:
        trials = simulate(n_nodes, trials_per_cell, faults, args.slow_ratio, args.seed, args.quiet_slow_ratio)
        print(grid_row(n_nodes, faults, trials, args.round_s), flush=True)
    print(
        f"\n{trials_per_cell} trials per row, seed {args.seed}; {base.slow_links} slow links at "
        f"{base.slow_link_factor:g}x on any pair; each measurement is a healthy "
        f"{base.healthy_gbps:g} GB/s times a uniform factor within ± the row's noise; on "
        f"{', '.join(map(str, GRID_SMALL_NODES))} nodes one slow node and no slow link. Slow nodes "
        "named: share of those injected; precision: share of the "
        "named culprits (nodes, links, groups) that were injected; false culprits/run: healthy nodes, "
        "links and groups named, per run."
    )


def misses(trials: Iterable[Trial], limit: int) -> list[str]:
    """Up to ``limit`` trials not named exactly, those that blamed a healthy node or link first: what was
    injected and what was named."""
    lines: list[str] = []
    if limit <= 0:
        return lines
    for t in sorted((t for t in trials if not t.exact), key=lambda t: -t.false_culprits):
        lines.append(
            f"  seed {t.seed}: slow nodes {sorted(t.slow_nodes)}, links {sorted(t.slow_links)} "
            f"({t.links_tested} tested), groups {[sorted(g) for g in t.cut_groups]}; named nodes "
            f"{sorted(t.named_nodes)}, links {sorted(t.named_links)}, "
            f"groups {[sorted(g) for g in t.named_groups]}"
        )
        if len(lines) == limit:
            break
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nodes", type=int, nargs="+", default=list(DEFAULT_NODES))
    parser.add_argument("--trials", type=int, help="per size (default: 2,000 at 64 nodes to 250 at 4,096)")
    parser.add_argument("--slow-nodes", type=int, default=Faults.slow_nodes)
    parser.add_argument("--slow-node-factor", type=float, default=Faults.slow_node_factor)
    parser.add_argument("--slow-links", type=int, default=Faults.slow_links)
    parser.add_argument("--slow-link-factor", type=float, default=Faults.slow_link_factor)
    parser.add_argument("--links-on-plan", action="store_true", help="slow links only on first-wave pairs")
    parser.add_argument("--noise", type=float, default=Faults.noise, help="±fraction per measurement")
    parser.add_argument("--healthy-gbps", type=float, default=HEALTHY_GBPS)
    parser.add_argument("--cut-groups", type=int, default=Faults.cut_groups, help="groups cut off the rest")
    parser.add_argument("--group-size", type=int, default=Faults.group_size)
    parser.add_argument("--cut-factor", type=float, default=Faults.cut_factor)
    parser.add_argument("--cut-shape", choices=("blocks", "strided"), default=Faults.cut_shape)
    parser.add_argument(
        "--inventory-plan", action="store_true", help="sparse partners half the inventory apart, not drawn"
    )
    parser.add_argument("--slow-ratio", type=float, default=AllreduceSection().slow_ratio)
    parser.add_argument("--quiet-slow-ratio", type=float, default=AllreduceSection().quiet_slow_ratio)
    parser.add_argument("--round-s", type=float, default=ROUND_S, help="seconds per round of pair tests")
    parser.add_argument("--misses", type=int, default=0, help="show up to N inexact trials per size")
    parser.add_argument(
        "--grid",
        action="store_true",
        help="the grid of noise, slow factors and slow-node counts at 64 and 256 nodes, as one table",
    )
    parser.add_argument("--seed", type=int, help=f"default {DEFAULT_SEED} ({GRID_SEED} with --grid)")
    args = parser.parse_args(argv)
    if args.seed is None:
        args.seed = GRID_SEED if args.grid else DEFAULT_SEED
    faults = Faults(
        slow_nodes=args.slow_nodes,
        slow_node_factor=args.slow_node_factor,
        slow_links=args.slow_links,
        slow_link_factor=args.slow_link_factor,
        noise=args.noise,
        healthy_gbps=args.healthy_gbps,
        links_on_plan=args.links_on_plan,
        cut_groups=args.cut_groups,
        group_size=args.group_size,
        cut_factor=args.cut_factor,
        cut_shape=args.cut_shape,
    )
    started = time.perf_counter()
    if args.grid:
        print_grid(args, faults)
        print(f"simulated in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        return
    print(HEADER.format(round_s=args.round_s))
    shown: list[str] = []
    for n_nodes in args.nodes:
        count = args.trials or default_trials(n_nodes)
        trials = simulate(
            n_nodes, count, faults, args.slow_ratio, args.seed, args.quiet_slow_ratio, args.inventory_plan
        )
        print(table_row(n_nodes, trials, args.round_s), flush=True)
        found = misses(trials, args.misses)
        if found:
            shown += [f"{n_nodes:,} nodes, not named exactly:", *found]
    print(
        f"\n{faults.describe()}; slow below the healthy pairs' median minus {SPREAD_SIGMAS:g} robust "
        f"standard deviations, at most {args.quiet_slow_ratio:g}x it and at least {args.slow_ratio:g}x the "
        f'typical pair. Trial t at n nodes is seeded "{args.seed}:n:t" (--seed {args.seed}). Slow '
        "nodes/links/groups named: share of those injected; exact: runs naming exactly what was "
        "injected; precision: share of the named culprits that were injected."
    )
    for line in shown:
        print(line)
    print(f"simulated in {time.perf_counter() - started:.1f} s", file=sys.stderr)


if __name__ == "__main__":
    main()
