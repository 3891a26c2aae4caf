"""The ``rails`` judge: each node's rail tests against what a healthy rail test does
(``rail_speeds``: rails are alike), at the pair message (bandwidth) and at 8 bytes (latency), a
test slow only when the job's re-test confirmed it. A rail slow with both its ring neighbours is the
node's card on that rail; every rail of a node slow is the node, not a card; one test slow while
both its nodes do well with their other neighbour is the path between them; a rail slow between
every pair is the rail's; with two nodes, which side is slow cannot be told. Pure: a job's outcome
in, findings out.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from checks.job.node.rail_speeds import best_busbw, healthy_rail, rail_typicals, slow_tests
from checks.job.node.rails import LATENCY_BYTES
from checks.job.outcome import JobOutcome, node_names
from checks.job.phase import read_phase
from checks.job.settings import RailsSection
from checks.rails.details import NAME, Measured, RailPart, RailTest, SlowRail
from preflight.config import Config
from preflight.facts_values import records
from preflight.model import CheckResult, with_check_details
from preflight.nodeset import fold
from preflight.status import Status

Test = tuple[int, int, int]
# A latency re-test whose most held-back rank's threads waited for a CPU this long a second of it
# is not judged (checks.job.node.cpu_wait): on the lab's shared cores healthy 8-byte all-reduces
# waited 0.6-1.7 s a second and ran up to 2.4x slower than the fastest; NCCL's ranks on their own
# cores do not wait.
LATENCY_CPU_WAIT = 0.25
# A finding about a rail's latency: ``form`` says which of the bandwidth findings' forms it takes.
LATENCY_ITEM = "rail_latency"


def rail_parts(section: Mapping[str, Any], names: Sequence[str], gpu: bool) -> dict[str, list[RailPart]]:
    """What each of each node's rails is, as its ranks reported: a GPU (its PCI address) or an
    interface; empty where no rank said."""
    rails = int(section.get("rails") or 0)
    parts: dict[str, list[RailPart]] = {name: [{} for _ in range(rails)] for name in names}
    for card in records(section.get("cards")):
        node, local = card.get("node_rank"), card.get("local_rank")
        if not isinstance(node, int) or not 0 <= node < len(names):
            continue
        host = names[node]
        if gpu and isinstance(local, int) and local < rails:
            address = card.get("gpu")
            parts[host][local] = {"local_rank": local, **({"gpu": str(address)} if address else {})}
        elif not gpu and local == 0:
            for rail, interface in enumerate(list(card.get("interfaces") or [])[:rails]):
                parts[host][rail] = {"interface": str(interface)}
    return parts


def rail_name(rail: int, part: RailPart) -> str:
    """A rail by what it is: ``GPU 3 at 00000000:18:00.0``, ``eth1``, else ``rail 3``."""
    if "local_rank" in part:
        return f"GPU {part['local_rank']}" + (f" at {part['gpu']}" if "gpu" in part else "")
    return part.get("interface") or f"rail {rail}"


def judge_rails(outcome: JobOutcome, config: Config) -> list[CheckResult]:
    phase = read_phase(NAME, outcome)
    if phase.section is None:
        return phase.findings
    results, section = phase.findings, phase.section
    names = node_names(outcome)
    gpu = (outcome.document or {}).get("device") == "cuda"
    tests = [t for t in records(section.get("tests")) if _known(t, len(names))]
    parts = rail_parts(section, names, gpu)
    named = {host: [rail_name(r, part) for r, part in enumerate(rails)] for host, rails in parts.items()}
    slow_ratio = config.section(RailsSection).slow_ratio
    bandwidth = SlowRails([t for t in tests if not t.get("latency")], slow_ratio, names, parts, gpu)
    latency = SlowRails([t for t in tests if t.get("latency")], slow_ratio, names, parts, gpu, latency=True)
    details: Measured = {
        "rails": int(section.get("rails") or 0),
        "rail_names": named,
        "rail_parts": parts,
        "tests": [_named_test(t, names) for t in tests],
        "typical_gbps": {str(rail): value for rail, value in rail_typicals(bandwidth.busbw).items()},
        "healthy_gbps": bandwidth.healthy,
        "latency_us": {str(rail): latency.micros(v) for rail, v in rail_typicals(latency.busbw).items()},
        "healthy_latency_us": latency.micros(latency.healthy) if latency.busbw else None,
        "latency_unjudged": [[names[t[0]], names[t[1]], t[2]] for t in latency.unjudged],
        "duration_s": section.get("duration_s"),
    }
    found = bandwidth.findings()
    # One root cause, one finding: a rail slow at both sizes is named for its bandwidth.
    blamed = {host for result in found for host in result.hosts}
    found += [r for r in latency.findings() if not set(r.hosts) <= blamed]
    if not found and not results:
        return [CheckResult(NAME, "pass", _passed(details, len(bandwidth.busbw)), (), dict(details))]
    return with_check_details([*results, *found], details)


def _waited(test: Mapping[str, Any]) -> float:
    wait = test.get("cpu_wait")
    return float(wait) if isinstance(wait, int | float) and not isinstance(wait, bool) else 0.0


def _known(test: Mapping[str, Any], n_nodes: int) -> bool:
    nodes = test.get("nodes")
    return isinstance(nodes, list) and all(isinstance(n, int) and 0 <= n < n_nodes for n in nodes)


def _named_test(test: Mapping[str, Any], names: Sequence[str]) -> RailTest:
    return {
        "nodes": [names[int(n)] for n in test["nodes"]],
        "rail": int(test.get("rail", -1)),
        "ranks": [int(r) for r in test.get("ranks") or [] if isinstance(r, int)],
        "busbw_gbps": float(test.get("busbw_gbps") or 0.0),
        "time_s": float(test.get("time_s") or 0.0),
        "size_bytes": int(test.get("size_bytes") or 0),
        "retest": bool(test.get("retest")),
        "latency": bool(test.get("latency")),
    }


def _passed(details: Measured, n_tests: int) -> str:
    typical = list(details["typical_gbps"].items())[:8]
    shown = ", ".join(f"rail {rail} {value:.3g}" for rail, value in typical)
    shown += " GB/s busbw"
    latencies = list(details["latency_us"].values())
    if latencies:
        shown += f"; {min(latencies):.3g}-{max(latencies):.3g} µs an all-reduce of {LATENCY_BYTES} bytes"
    if details["latency_unjudged"]:
        count = len(details["latency_unjudged"])
        tests = "1 slow latency test" if count == 1 else f"{count} slow latency tests"
        shown += f"; {tests} not judged: the ranks waited for a CPU"
    hosts = fold(details["rail_names"])
    return (
        f"each of the {details['rails']} rails of {hosts} runs alike in {n_tests} tests with its ring "
        f"neighbours ({shown})"
    )


class SlowRails:
    """Who is at fault for the slow rail tests of one run, at the pair message (bandwidth) or, with
    ``latency``, at LATENCY_BYTES (their busbw is the inverse of their time: the same rules apply,
    and the findings say the latency)."""

    def __init__(
        self,
        tests: Sequence[Mapping[str, Any]],
        slow_ratio: float,
        names: Sequence[str],
        parts: Mapping[str, Sequence[RailPart]],
        gpu: bool,
        latency: bool = False,
    ) -> None:
        # Held to the first tests' healthy rail, as the job was when it chose the re-tests; a test is
        # slow when its best, re-test included, is below that, and it was re-tested.
        first = best_busbw([t for t in tests if not t.get("retest")])
        self.healthy = healthy_rail(first)
        self.busbw = best_busbw(tests)
        retests = [t for t in tests if t.get("retest")]
        slow = {t for t in slow_tests(self.busbw, slow_ratio, self.healthy) if t in set(best_busbw(retests))}
        # An op of a few bytes takes as long as its ranks wait to be scheduled: a latency re-test
        # whose ranks waited for a CPU says the node's load, not its card (CPU ranks sharing cores).
        waited = {
            test
            for test in best_busbw([t for t in retests if _waited(t) >= LATENCY_CPU_WAIT])
            if latency and test in slow
        }
        self.slow, self.unjudged = slow - waited, sorted(waited)
        self.names, self.parts, self.gpu, self.latency = names, parts, gpu, latency
        self.nodes = sorted({n for test in self.busbw for n in test[:2]})
        self.rails = sorted({test[2] for test in self.busbw})
        tests_of: dict[tuple[int, int], list[Test]] = {}
        for test in self.busbw:
            for node in test[:2]:
                tests_of.setdefault((node, test[2]), []).append(test)
        # A node's rail is slow when every one of its tests on that rail is.
        self.slow_rails = {key for key, tests in tests_of.items() if all(t in self.slow for t in tests)}

    @staticmethod
    def micros(busbw: float) -> float:
        """The microseconds an all-reduce of LATENCY_BYTES took between two ranks, from its busbw
        (two ranks: busbw is algbw, bytes over seconds)."""
        return LATENCY_BYTES / (busbw * 1e9) * 1e6 if busbw > 0 else float("inf")

    def ratio(self, tests: Sequence[Test]) -> tuple[float, float]:
        """The slowest of ``tests``: its share of a healthy rail test, and its busbw."""
        worst = min(self.busbw[t] for t in tests)
        return worst / self.healthy, worst

    def how(self, tests: Sequence[Test]) -> str:
        ratio, busbw = self.ratio(tests)
        if self.latency:
            return (
                f"{1 / ratio:.2g}x the latency of a healthy rail test ({self.micros(busbw):.3g} vs "
                f"{self.micros(self.healthy):.3g} µs an all-reduce of {LATENCY_BYTES} bytes)"
            )
        return f"{ratio:.2g}x a healthy rail test ({busbw:.3g} vs {self.healthy:.3g} GB/s busbw)"

    def findings(self) -> list[CheckResult]:
        if not self.slow:
            return []
        if len(self.nodes) == 2:
            return [self._pair()]
        everywhere = [r for r in self.rails if all((n, r) in self.slow_rails for n in self.nodes)]
        found = [self._everywhere(everywhere)] if everywhere else []
        blamed: set[tuple[int, int]] = set()
        for node in self.nodes:
            rails = [r for r in self.rails if (node, r) in self.slow_rails and r not in everywhere]
            if rails:
                blamed.update((node, r) for r in rails)
                found.append(self._node(node, rails))
        links = sorted(
            t for t in self.slow if t[2] not in everywhere and not {(t[0], t[2]), (t[1], t[2])} & blamed
        )
        found += [self._link(test) for test in links]
        return found

    def _part(self, host: str, rail: int) -> RailPart:
        parts = self.parts.get(host) or []
        return parts[rail] if rail < len(parts) else {}

    def _rail_label(self, host: str, rail: int) -> str:
        label = rail_name(rail, self._part(host, rail))
        return f"rail {rail} ({label})" if label != f"rail {rail}" else label

    def _result(
        self,
        status: Status,
        summary: str,
        hosts: Sequence[str],
        item: str,
        rails: Sequence[int],
        tests: Sequence[Test],
    ) -> CheckResult:
        ratio, busbw = self.ratio(tests)
        found: SlowRail = {"item": item, "rails": list(rails), "ratio": ratio, "busbw_gbps": busbw}
        if self.latency:
            found["item"], found["form"], found["latency_us"] = LATENCY_ITEM, item, self.micros(busbw)
        if len(hosts) == 1:
            found["node"] = hosts[0]
            found["parts"] = [self._part(hosts[0], rail) for rail in rails]
        else:
            found["nodes"] = list(hosts)
        return CheckResult(NAME, status, summary, tuple(hosts), dict(found))

    def _node(self, node: int, rails: Sequence[int]) -> CheckResult:
        host = self.names[node]
        tests = [t for t in self.slow if node in t[:2] and t[2] in rails]
        partners = fold(sorted({self.names[n] for t in tests for n in t[:2] if n != node}))
        if len(rails) == len(self.rails):
            summary = (
                f"{host} is slow on every one of its {len(rails)} rails with {partners}, re-tested: "
                f"{self.how(tests)}; the node itself (its PCIe, CPU or a setting all its NICs share), "
                "not one card"
            )
            return self._result("fail", summary, (host,), "slow_on_every_rail", rails, tests)
        shown = " and ".join(self._rail_label(host, r) for r in rails)
        card = (
            "the NIC nearest that GPU, its cable or switch port, or the GPU's PCIe path to it"
            if self.gpu
            else "that interface, its cable or its switch port"
        )
        verb = "are" if len(rails) > 1 else "is"
        summary = f"{host}'s {shown} {verb} slow with both its neighbours ({partners}), re-tested: "
        return self._result("fail", f"{summary}{self.how(tests)}; {card}", (host,), "slow_rail", rails, tests)

    def _pair(self) -> CheckResult:
        tests = sorted(self.slow)
        a, b = self.names[tests[0][0]], self.names[tests[0][1]]
        rails = sorted({t[2] for t in tests})
        shown = " and ".join(self._rail_label(a, r) for r in rails)
        summary = (
            f"{shown} between {a} and {b} {'are' if len(rails) > 1 else 'is'} slow, re-tested: "
            f"{self.how(tests)}; with two nodes, which side is slow cannot be told from the run"
        )
        return self._result("fail", summary, (a, b), "slow_rail_pair", rails, tests)

    def _link(self, test: Test) -> CheckResult:
        a, b = self.names[test[0]], self.names[test[1]]
        summary = (
            f"{self._rail_label(a, test[2])} between {a} and {b} is slow, re-tested: {self.how([test])}, "
            "while both do well on it with their other neighbour: the path between them on that rail"
        )
        return self._result("fail", summary, (a, b), "slow_rail_link", [test[2]], [test])

    def _everywhere(self, rails: Sequence[int]) -> CheckResult:
        tests = [t for t in self.slow if t[2] in rails]
        shown = " and ".join(f"rail {r}" for r in rails)
        summary = (
            f"{shown} {'are' if len(rails) > 1 else 'is'} slow between every pair of nodes: "
            f"{self.how(tests)}; the rail's switch, or a setting of that rail's NICs on every node"
        )
        hosts = [self.names[n] for n in self.nodes]
        return self._result("fail", summary, hosts, "slow_rail_everywhere", rails, tests)
