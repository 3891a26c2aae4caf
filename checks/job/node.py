"""The job every rank runs: all-reduce sweep, pair tests, DDP smoke training; rank 0 prints one
``PREFLIGHT-JOB-RESULT <json>`` line. Self-contained (standard library and torch, Python 3.8+): sent
to each node's host process (:func:`host` starts the node's ranks), its argument one JSON object in
``sys.argv[1]``.
"""

from __future__ import annotations

import base64
import contextlib
import copy
import ctypes
import gc
import hashlib
import json
import os
import random
import select
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
import traceback
import types
from datetime import timedelta
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    Pair = tuple[int, int]
    JsonDict = dict[str, Any]

JOB_VERSION = 1
RESULT_MARKER = "PREFLIGHT-JOB-RESULT "
# Every rank writes a rank line to stderr when it starts, and local rank 0 of each node a phase
# line when a phase starts: the controller maps ranks to nodes and knows how far the job got
# even when rank 0 never prints its document.
RANK_MARKER = "PREFLIGHT-JOB-RANK "
PHASE_MARKER = "PREFLIGHT-JOB-PHASE "
# Every rank also writes a heartbeat line every BEAT_INTERVAL_S from a thread of its own, from
# its first moment (before torch is imported), with the phase it is in: a node whose heartbeats
# stop arriving (its link cut, its processes stopped) is named by the controller within seconds.
BEAT_MARKER = "PREFLIGHT-JOB-BEAT "
BEAT_INTERVAL_S = 2.0
# Before it joins, a rank asks every MASTER_POLL_S (longer past MASTER_POLL_RANKS ranks) whether
# rank 0's store listens yet, for MASTER_WAIT_S at most (then torch's own retries take over).
MASTER_POLL_S = 0.02
MASTER_POLL_RANKS = 256
MASTER_POLL_MAX_S = 0.5
MASTER_WAIT_S = 10.0
PHASES = ("compute", "intranode", "allreduce", "ddp")

GB = 1e9
FLOAT32_BYTES = 4
# The sweep starts at 1 KiB: smaller messages only measure launch latency, which says
# nothing about the links.
SWEEP_START_BYTES = 1024
# A pair test first times a message this small: a link too slow for the full pair message then
# gets a smaller one, so that one op stays well inside the pair's budget and the collective timeout.
PAIR_PROBE_BYTES = 64 * 1024
# Correctness values repeat with this period over elements; prime, so that a chunk landing
# at the wrong offset (a multiple of any power of two) shows up as wrong values.
PATTERN_PERIOD = 11
# DDP smoke model: small enough to train in milliseconds on a CPU, big enough to need buckets.
DDP_SEED = 20240611
DDP_IN = 16
DDP_HIDDEN = 32
DDP_BATCH = 64
DDP_LR = 0.05
# Local forward+backward steps timed without DDP, to see a straggler's own compute.
COMPUTE_TIMING_STEPS = 10
# On a GPU the small MLP measures kernel launches, not the GPU: the straggler timing runs a
# forward+backward of one square half-precision layer instead (3 GEMMs, about 3.3 TFLOP).
COMPUTE_GPU_DIM = 8192
# Default arguments; a launcher may send fewer keys.
DEFAULT_ALLREDUCE: JsonDict = {
    "sweep_budget_s": 6.0,
    "sweep_factor": 2,
    "max_bytes": 64 * 1024 * 1024,
    "pair_bytes": 4 * 1024 * 1024,
    "pair_budget_s": 2.0,
    "warmup_iters": 5,
    "iters": 20,
    "slow_ratio": 0.5,
    "quiet_slow_ratio": 0.9,
    "pairwise": True,
    "rounds": [],
}
DEFAULT_DDP: JsonDict = {"steps": 30}
DEFAULT_COMPUTE: JsonDict = {"burn_s": 1.0, "matrix": 0}
DEFAULT_INTRANODE: JsonDict = {"size_bytes": 4 << 20, "iters": 3, "copy_bytes": 256 << 20}
INTRANODE_TRIALS = 3
# Companion scripts shipped beside this one: the environment variable holding each (base64), and
# the file it is read from when this script runs from a checkout (tests).
COMPANIONS = {"compute": ("PREFLIGHT_JOB_COMPUTE", "node_compute.py")}


# --------------------------------------------------------------------------- pure helpers
# The re-test planning is here, not in the controller, because the ranks plan re-tests during
# the job; checks.job.pairs imports it from this file, so the job and the judge share one copy.


def bus_bandwidth(size_bytes: int, time_s: float, n_ranks: int) -> tuple[float, float]:
    """(algbw, busbw) in GB/s of one all-reduce as nccl-tests defines them (GB = 1e9 bytes)."""
    if time_s <= 0:
        return 0.0, 0.0
    algbw = size_bytes / time_s / GB
    return algbw, algbw * (2.0 * (n_ranks - 1) / n_ranks if n_ranks > 0 else 0.0)


def sweep_sizes(max_bytes: int, start_bytes: int = SWEEP_START_BYTES, factor: int = 2) -> list[int]:
    """Message sizes from ``start_bytes`` up to ``max_bytes`` (always included), each ``factor``
    times the one before (nccl-tests' ``-f``); the top two are a doubling apart, so that the plateau
    a fabric reaches at large messages is seen at two sizes whatever the factor."""
    top = max(FLOAT32_BYTES, max_bytes - max_bytes % FLOAT32_BYTES)
    factor = max(2, int(factor))
    sizes: list[int] = []
    size = min(start_bytes, top)
    while size < top:
        sizes.append(size)
        size *= factor
    half = top // 2 - (top // 2) % FLOAT32_BYTES
    if sizes and half > sizes[-1]:
        sizes.append(half)
    sizes.append(top)
    return sizes


def plan_iterations(probe_s: float, remaining_s: float, warmup_iters: int, iters: int) -> tuple[int, int]:
    """(warm-ups, timed iterations) that fit ``remaining_s``, keeping one op for the correctness check.

    Timed iterations come first (at least one); warm-ups get what is left. The probe op that
    measured ``probe_s`` was itself the first warm-up.
    """
    per_op = max(probe_s, 1e-9)
    available = remaining_s - per_op
    timed = max(1, min(iters, int(available / per_op)))
    warm = max(0, min(warmup_iters, int((available - timed * per_op) / per_op)))
    return warm, timed


def pair_size(target_bytes: int, probe_bytes: int, probe_s: float, budget_s: float) -> int:
    """The pair message: ``target_bytes``, or a power of two at least ``probe_bytes`` small enough that
    one op (estimated from the probe, as if bandwidth-bound) takes a third of the budget at most."""
    if probe_s <= 0 or 3 * probe_s * target_bytes / probe_bytes <= budget_s:
        return target_bytes
    fits = probe_bytes * (budget_s / 3) / probe_s
    size = probe_bytes
    while size * 2 <= min(fits, target_bytes):
        size *= 2
    return size


def pair_key(a: int, b: int) -> Pair:
    return (a, b) if a < b else (b, a)


def node_best(busbw_by_pair: Mapping[Pair, float]) -> dict[int, float]:
    """Each node's best pair busbw: what the node can do when its partner is healthy."""
    best: dict[int, float] = {}
    for (a, b), busbw in busbw_by_pair.items():
        for node in (a, b):
            if node not in best or busbw > best[node]:
                best[node] = busbw
    return best


# Node bests this many times apart are two populations (see typical_busbw), not one spread: more
# than NIC generations mixed in one cluster (200 against 400 Gb/s) set apart.
SPLIT_RATIO = 3.0


def typical_busbw(busbw_by_pair: Mapping[Pair, float]) -> float:
    """The median over nodes of each node's best pair: what a healthy pair does.

    A plain median of pairs fails on small clusters: with three nodes and one bad node, two
    of the three pairs are slow and the median is the slow value. A bad node drags down only
    its own best; a bad link drags down no node's best.

    When a quarter of the nodes or more did better than SPLIT_RATIO x the median node (a cut
    across the middle of the cluster, where most nodes met the other side only), the fast ones
    are what a healthy pair does: a pair cannot beat its hardware, and their median is taken
    instead.
    """
    best = sorted(node_best(busbw_by_pair).values())
    if not best:
        return 0.0
    middle = float(statistics.median(best))
    upper = best[(3 * len(best)) // 4]
    if middle < upper / SPLIT_RATIO:
        middle = float(statistics.median(v for v in best if v >= upper / SPLIT_RATIO))
    return middle


# Slow adapts to the spread of the run's own healthy pairs: their median minus some robust
# standard deviations (MAD_TO_SIGMA x the median absolute deviation), never above quiet_slow_ratio
# x that median (a quiet fabric) nor below slow_ratio x the typical pair (a noisy one). The job
# re-tests the pairs RETEST_SIGMAS below the median of the first tests (a wide net: the spread of
# a few dozen pairs is itself uncertain); the judge, with the re-tests as more samples, calls a
# measurement slow SPREAD_SIGMAS below it. Fewer healthy pairs than MIN_SPREAD_PAIRS tell no
# spread from a fault: the threshold is then slow_ratio alone.
RETEST_SIGMAS = 1.5
SPREAD_SIGMAS = 2.0
WINDOW_SIGMAS = 3.0
MAD_TO_SIGMA = 1.4826
MIN_SPREAD_PAIRS = 8
QUIET_SLOW_RATIO = 0.9


def healthy_spread(values: Iterable[float], floor: float) -> tuple[float, float, int]:
    """(median, robust standard deviation, count) of the measurements at or above ``floor``."""
    healthy = [value for value in values if value >= floor]
    if not healthy:
        return 0.0, 0.0, 0
    center = float(statistics.median(healthy))
    deviation = float(statistics.median(abs(value - center) for value in healthy))
    return center, MAD_TO_SIGMA * deviation, len(healthy)


def robust_spread(values: Iterable[float], floor: float, quiet_ratio: float) -> tuple[float, float, int]:
    """(center, standard deviation, count) of the healthy measurements: those at or above ``floor``
    give a first median and robust deviation; the mean and standard deviation are then taken over
    those within WINDOW_SIGMAS of that median, either side, and again within a narrower window of
    those (no slow pair widens them, and over a few dozen pairs they are far steadier than the
    median and its absolute deviation)."""
    values = list(values)
    center, sigma, count = healthy_spread(values, floor)
    if count < MIN_SPREAD_PAIRS:
        return center, sigma, count
    # Twice: the window of the second pass is drawn by the steadier first estimate.
    for width in (WINDOW_SIGMAS, WINDOW_SIGMAS - 0.5):
        low = max(floor, center - width * sigma)
        window = [value for value in values if low <= value <= 2 * center - low]
        if len(window) < MIN_SPREAD_PAIRS:
            break
        center, sigma, count = float(statistics.fmean(window)), float(statistics.pstdev(window)), len(window)
    return center, sigma, count


def spread_threshold(
    spread: tuple[float, float, int], floor: float, quiet_ratio: float, sigmas: float
) -> float:
    """``sigmas`` robust standard deviations below the median of ``spread`` (center, sigma, count),
    within [floor, quiet_ratio x center]; ``floor`` when too few pairs were healthy or quiet_ratio
    is not above the floor's ratio."""
    center, sigma, count = spread
    if count < MIN_SPREAD_PAIRS or quiet_ratio * center <= floor:
        return floor
    return max(floor, min(quiet_ratio * center, center - sigmas * sigma))


def retest_threshold(
    busbw_by_pair: Mapping[Pair, float], slow_ratio: float, quiet_ratio: float = QUIET_SLOW_RATIO
) -> float:
    """busbw below which the job re-tests a pair, from the first tests (see RETEST_SIGMAS)."""
    floor = slow_ratio * typical_busbw(busbw_by_pair)
    spread = robust_spread(busbw_by_pair.values(), floor, quiet_ratio)
    return spread_threshold(spread, floor, quiet_ratio, RETEST_SIGMAS)


def slow_pairs(
    busbw_by_pair: Mapping[Pair, float], slow_ratio: float, quiet_ratio: float = QUIET_SLOW_RATIO
) -> list[Pair]:
    threshold = retest_threshold(busbw_by_pair, slow_ratio, quiet_ratio)
    return sorted(pair for pair, busbw in busbw_by_pair.items() if busbw < threshold)


def pack_rounds(tests: Iterable[Pair]) -> list[list[Pair]]:
    """Tests packed first-fit into rounds of disjoint pairs, in the order given."""
    rounds: list[list[Pair]] = []
    busy: list[set[int]] = []
    for a, b in tests:
        for index, nodes in enumerate(busy):
            if a not in nodes and b not in nodes:
                rounds[index].append((a, b))
                nodes.update((a, b))
                break
        else:
            rounds.append([(a, b)])
            busy.append({a, b})
    return rounds


# Known-good partners each suspect node is re-tested with, and fast pairs re-tested as controls
# on small clusters (see retest_plan).
RETEST_GOOD_PARTNERS = 2
CONTROL_PAIRS = 2


def retest_plan(
    busbw_by_pair: Mapping[Pair, float], slow_ratio: float, quiet_ratio: float = QUIET_SLOW_RATIO
) -> list[list[Pair]]:
    """Rounds of re-tests for the pairs below ``retest_threshold``; deterministic.

    Every slow pair is re-tested once, and every node that was slow with all its partners is
    tested against two known-good nodes (fast with some partner, fewest slow pairs first, a
    partner it has not had yet preferred, then one well inside the spread, drawn from around
    the cluster rather than its neighbours in rank order). Two, because one good partner may
    sit behind a slow link: a healthy node that met a slow node and then crossed a slow link
    would be blamed. A node already slow with two or more partners is judged by its tests
    against good nodes alone: re-testing each of its pairs would only repeat the same slow
    number, one round per pair.
    """
    threshold = retest_threshold(busbw_by_pair, slow_ratio, quiet_ratio)
    slow = sorted(pair for pair, busbw in busbw_by_pair.items() if busbw < threshold)
    if not slow:
        return []
    partners: dict[int, set[int]] = {}
    fast: set[int] = set()
    slow_count: dict[int, int] = {}
    for (a, b), busbw in busbw_by_pair.items():
        partners.setdefault(a, set()).add(b)
        partners.setdefault(b, set()).add(a)
        if busbw >= threshold:
            fast.update((a, b))
        else:
            slow_count[a] = slow_count.get(a, 0) + 1
            slow_count[b] = slow_count.get(b, 0) + 1
    lonely = sorted({node for pair in slow for node in pair} - fast)
    judged_alone = {node for node in lonely if len(partners[node]) >= 2}
    tests: list[Pair] = [p for p in slow if p[0] not in judged_alone and p[1] not in judged_alone]
    planned = set(tests)
    good = sorted(fast, key=lambda node: (slow_count.get(node, 0), node))
    usage = {node: 0 for node in good}
    # Good nodes whose best pair was under the median: fast, but near the edge of the spread, so a
    # slow node's test with one may confirm nothing; taken after the others.
    middle = statistics.median(busbw_by_pair.values())
    best = node_best(busbw_by_pair)
    weak = {node for node in good if best[node] < middle}
    by_position = sorted(good)
    for node in lonely:
        for draw in range(RETEST_GOOD_PARTNERS):
            # The good node with the fewest uses, fewest slow pairs, not yet its partner, and the
            # first from a place drawn for this node and partner (the same on every rank): scanned
            # in that last order, so the scan stops at the first that nothing can beat. Drawn, not
            # the next in rank order: neighbours in the inventory often share a switch, and a node
            # of a group cut off with it would look fast with its own.
            least_used = min(usage.values())
            start = random.Random(node * RETEST_GOOD_PARTNERS + draw).randrange(len(by_position))
            partner, top = None, None
            for index in range(len(by_position)):
                g = by_position[(start + index) % len(by_position)]
                if g == node or pair_key(node, g) in planned:
                    continue
                rank = (g in partners[node], usage[g], slow_count.get(g, 0), g in weak)
                if top is None or rank < top:
                    partner, top = g, rank
                if rank == (False, least_used, 0, False):
                    break
            if partner is None:
                break
            usage[partner] += 1
            key = pair_key(node, partner)
            planned.add(key)
            tests.append(key)
    # Too few pairs to measure the spread: the fast pairs nearest their median are re-tested too,
    # as controls. Slower in the re-test wave, they say the whole fabric (or the machines) was
    # busy then, and the judge scales the re-tests back by as much.
    # The slow pairs are then re-tested once more, after the controls: a link slow three times,
    # seconds apart, is no passing burst of someone else's work.
    fast_pairs = [(busbw, pair) for pair, busbw in busbw_by_pair.items() if busbw >= threshold]
    if fast_pairs and len(fast_pairs) < MIN_SPREAD_PAIRS:
        middle = statistics.median(busbw for busbw, _ in fast_pairs)
        for _, pair in sorted(fast_pairs, key=lambda item: (abs(item[0] - middle), item[1]))[:CONTROL_PAIRS]:
            if pair not in planned:
                planned.add(pair)
                tests.append(pair)
        tests += [pair for pair in slow if pair in planned]
    # Suspects are also tested with each other, in a chain: nodes fast among themselves but slow
    # with the others are a group cut off from them (a switch uplink), not so many slow nodes.
    if len(lonely) >= 3:
        for offset in (0, 1):
            for index in range(offset, len(lonely) - 1, 2):
                key = pair_key(lonely[index], lonely[index + 1])
                if key not in planned and key not in busbw_by_pair:
                    planned.add(key)
                    tests.append(key)
    return pack_rounds(tests)


def side_plan(
    measurements: Iterable[Mapping[str, Any]], slow_ratio: float, quiet_ratio: float = QUIET_SLOW_RATIO
) -> list[list[Pair]]:
    """Rounds testing with each other the nodes that still look slow after the re-tests; deterministic.

    A node slow with its first partner and far too slow with a known-good node it was re-tested
    against (beyond the healthy pairs' window) is a slow node or one of a group cut off from the
    rest (a switch uplink; a known-good node may be of the group too, paired with another of it
    in the first wave): only a test with another such node tells (fast together: a group).
    Each is tested with the next two in rank order (about four rounds), so that a group is
    joined through its members' tests with each other wherever the inventory lists them, and
    past one slow node between them.
    """
    records = list(measurements)
    first = first_busbw(records)
    threshold = retest_threshold(first, slow_ratio, quiet_ratio)
    floor = slow_ratio * typical_busbw(first)
    # Slow beyond doubt: outside the healthy pairs' window (see robust_spread).
    spread = robust_spread(first.values(), floor, quiet_ratio)
    clearly = spread_threshold(spread, floor, quiet_ratio, WINDOW_SIGMAS)
    good = {node for pair, busbw in first.items() if busbw >= threshold for node in pair}
    tested: set[Pair] = set()
    with_good: dict[int, list[float]] = {}
    for record in records:
        a, b = (int(node) for node in record["nodes"])
        tested.add(pair_key(a, b))
        for node, partner in ((a, b), (b, a)):
            if node not in good and partner in good:
                with_good.setdefault(node, []).append(float(record["busbw_gbps"]))
    looks_slow = sorted(node for node, values in with_good.items() if min(values) < clearly)
    tests: list[Pair] = []
    for step in (1, 2):
        for index in range(len(looks_slow) - step):
            key = pair_key(looks_slow[index], looks_slow[index + step])
            if key not in tested:
                tested.add(key)
                tests.append(key)
    return pack_rounds(tests)


def first_busbw(measurements: Iterable[Mapping[str, Any]]) -> dict[Pair, float]:
    """busbw of each pair's first test (re-tests left out)."""
    found: dict[Pair, float] = {}
    for record in measurements:
        if record.get("retest"):
            continue
        a, b = record["nodes"]
        found.setdefault(pair_key(int(a), int(b)), float(record["busbw_gbps"]))
    return found


def pattern_values(period_index: int, rank: int) -> int:
    """The value rank ``rank`` puts at an element whose index is ``period_index`` mod the period."""
    return (7 * period_index + rank) % PATTERN_PERIOD + 1


def expected_sums(world_size: int) -> list[int]:
    """The exact all-reduce sum of ``pattern_values`` over every rank, per index in the period."""
    return [sum(pattern_values(k, r) for r in range(world_size)) for k in range(PATTERN_PERIOD)]


def _by_period(buffer: Any, period: int) -> tuple[Any, Any]:
    """``buffer`` as rows of ``period`` elements, and the elements left over (views, no copy)."""
    whole = buffer.numel() - buffer.numel() % period
    return buffer[:whole].view(-1, period), buffer[whole:]


def fill_periodic(torch: Any, buffer: Any, values: Sequence[float]) -> None:
    """Write ``values`` over ``buffer`` again and again, in place."""
    period = torch.tensor(list(values), dtype=buffer.dtype, device=buffer.device)
    rows, rest = _by_period(buffer, len(values))
    rows.copy_(period.expand_as(rows))
    rest.copy_(period[: rest.numel()])


def count_unlike(torch: Any, buffer: Any, values: Sequence[float]) -> int:
    """Elements of ``buffer`` that differ from ``values`` repeated over it (as fill_periodic writes)."""
    period = torch.tensor(list(values), dtype=buffer.dtype, device=buffer.device)
    rows, rest = _by_period(buffer, len(values))
    return int((rows != period).sum().item()) + int((rest != period[: rest.numel()]).sum().item())


def nccl_version_text(code: int) -> str:
    """NCCL's version code as text: NCCL_VERSION(X,Y,Z) is X*1000+Y*100+Z up to 2.8, X*10000+Y*100+Z after."""
    if code >= 10000:
        return f"{code // 10000}.{code % 10000 // 100}.{code % 100}"
    return f"{code // 1000}.{code % 1000 // 100}.{code % 100}"


def nccl_libraries(maps: str) -> list[str]:
    """The NCCL shared libraries mapped into a process, from its /proc/<pid>/maps text."""
    found: list[str] = []
    for line in maps.splitlines():
        path = line.split(None, 5)[5].strip() if len(line.split(None, 5)) == 6 else ""
        name = path.rsplit("/", 1)[-1]
        if name.startswith("libnccl.so") and path not in found:
            found.append(path)
    return found


def loaded_nccl(torch: Any) -> JsonDict:
    """The NCCL this process runs, which can differ from the one torch was built with: the library
    mapped into the process asked through ncclGetVersion (dlopen of a loaded library returns it);
    torch's build version when NCCL is linked into torch itself."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as handle:
            libraries = nccl_libraries(handle.read())
    except OSError:
        libraries = []
    for path in libraries:
        try:
            code = ctypes.c_int(0)
            if ctypes.CDLL(path).ncclGetVersion(ctypes.byref(code)) == 0 and code.value > 0:
                return {"version": nccl_version_text(code.value), "library": path, "source": "ncclGetVersion"}
        except (OSError, AttributeError):
            continue
    try:
        built = torch.cuda.nccl.version()
        text = (
            ".".join(str(part) for part in built)
            if isinstance(built, tuple)
            else nccl_version_text(int(built))
        )
        return {"version": text, "library": None, "source": "torch build (NCCL linked into torch)"}
    except Exception as exc:
        return {"version": None, "library": None, "source": f"unknown: {_error_text(exc)}"}


def wait_for_master(address: str, port: int, timeout_s: float, world: int = 1) -> bool:
    """Wait until rank 0's store accepts connections; False when it did not within ``timeout_s``
    (the join then goes on as it would have, and names the master if it never answers).

    torch's own client retries a refused connection only after a growing pause of about half a
    second: a master that starts listening a moment after the others asked would cost every
    rank that pause. A connection opened and closed at once is harmless to the store. The name
    is resolved once; the tries come every MASTER_POLL_S (jittered), less often in a large
    world, so that the master's port gets at most about MASTER_POLL_RANKS / MASTER_POLL_S
    tries a second whatever the number of ranks."""
    deadline = time.monotonic() + timeout_s
    try:
        family, kind, proto, _, where = socket.getaddrinfo(address, port, type=socket.SOCK_STREAM)[0]
    except (OSError, IndexError):
        return False
    interval = min(MASTER_POLL_MAX_S, MASTER_POLL_S * max(1.0, world / MASTER_POLL_RANKS))
    while True:
        left = deadline - time.monotonic()
        try:
            with socket.socket(family, kind, proto) as probe:
                probe.settimeout(max(0.05, min(1.0, left)))
                probe.connect(where)
                return True
        except OSError:
            pause = interval * random.uniform(0.5, 1.5)
            if time.monotonic() + pause >= deadline:
                return False
            time.sleep(pause)


def _error_text(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    # torch errors often end in a C++ stack; the first line is the one a person reads.
    first = lines[0] if lines else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__


def _log(marker: str, payload: Mapping[str, Any]) -> None:
    sys.stderr.write(marker + json.dumps(dict(payload), sort_keys=True) + "\n")
    sys.stderr.flush()


def finite(value: Any) -> Any:
    """``value`` with NaN and infinities replaced by None: strict JSON has no such numbers."""
    if isinstance(value, float):
        return value if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, dict):
        return {key: finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(item) for item in value]
    return value


class _Progress:
    """What the heartbeat says: the phase this rank is in (set by the main thread with
    :func:`enter_phase`, which also beats at once, so that the controller learns of each phase
    as it starts, not up to a beat interval later)."""

    phase = "import"
    changed = threading.Event()


def enter_phase(name: str) -> None:
    _Progress.phase = name
    _Progress.changed.set()


def _beat(interval_s: float) -> None:
    rank = os.environ.get("RANK", "0")
    while True:
        _log(BEAT_MARKER, {"rank": int(rank) if rank.isdigit() else rank, "phase": _Progress.phase})
        _Progress.changed.wait(interval_s)
        _Progress.changed.clear()


def start_heartbeat(interval_s: float = BEAT_INTERVAL_S) -> None:
    threading.Thread(target=_beat, args=(interval_s,), name="preflight-heartbeat", daemon=True).start()


def load_companion(name: str) -> Any:
    """The companion script ``name`` as a module: from its environment variable, else from the
    file beside this one."""
    variable, filename = COMPANIONS[name]
    encoded = os.environ.get(variable)
    if encoded:
        source = base64.b64decode(encoded)
    else:
        with open(os.path.join(os.path.dirname(os.path.abspath(__file__)), filename), "rb") as file:
            source = file.read()
    module = types.ModuleType(f"preflight_job_{name}")
    exec(compile(source, f"preflight-job-{name}", "exec"), module.__dict__)
    return module


def _write_stdout_line(text: str) -> None:
    # One write of the whole line, so that other output on the same pipe cannot split it.
    pending = memoryview((text + "\n").encode("ascii"))
    while pending:
        pending = pending[os.write(1, pending) :]


# --------------------------------------------------------------------------- the job


class StoppedByPeer(Exception):
    """This rank left a phase because another rank failed in it (that rank reports the cause)."""


class Job:
    """One rank's view of the job: its place in the world and the phases it runs."""

    def __init__(self, torch: Any, dist: Any, args: Mapping[str, Any]) -> None:
        self.torch = torch
        self.dist = dist
        self.args = args
        self.rank = int(os.environ.get("RANK", "0"))
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.node_rank = int(os.environ.get("GROUP_RANK", "0"))
        # Collectives get a short deadline; joining gets a longer one: eight processes per node
        # importing torch from a cold shared filesystem can start tens of seconds apart.
        self.timeout_s = float(args.get("timeout_s", 60))
        self.join_timeout_s = float(args.get("join_timeout_s", 3 * self.timeout_s))
        self.group: Any = None  # every collective runs here, under timeout_s (set by start)
        self.side: Any = None  # a gloo group beside NCCL, for the join barrier that names missing ranks
        wanted = str(args.get("device", "cpu"))
        self.cuda = wanted == "cuda" and bool(torch.cuda.is_available())
        self.backend = str(args.get("backend") or ("nccl" if self.cuda else "gloo"))
        self.device = torch.device("cuda", self.local_rank) if self.cuda else torch.device("cpu")
        self.hostname = socket.gethostname()
        self.usable = False  # the process group answers collectives
        self.ranks: list[JsonDict] = []
        self.ranks_of_node: dict[int, list[int]] = {}
        # One communicator per pair of nodes, made once and reused by re-tests, destroyed after.
        self.pair_groups: dict[Pair, Any] = {}

    # ---- plumbing

    def sync(self) -> None:
        if self.cuda:
            self.torch.cuda.synchronize(self.device)

    def agree_max(self, values: Sequence[float], group: Any = None) -> list[float]:
        """The maximum of each value over the ranks of ``group``: the same numbers on every rank."""
        tensor = self.torch.tensor(list(values), dtype=self.torch.float64, device=self.device)
        self.dist.all_reduce(tensor, op=self.dist.ReduceOp.MAX, group=group or self.group)
        return [float(v) for v in tensor.tolist()]

    def agree_min(self, values: Sequence[float], group: Any = None) -> list[float]:
        return [-v for v in self.agree_max([-v for v in values], group)]

    def allocate(self, count: int, what: str, needed: bool = True) -> Any:
        """A float32 buffer of ``count`` elements, allocated on every rank or on none: ranks agree
        before the first collective on it, so that one rank out of memory (another process on
        its GPU) is named with its cause instead of leaving the others hung in a collective.
        Ranks with ``needed`` False take part in the agreement only."""
        buffer, failure = None, None
        if needed:
            try:
                buffer = self.torch.zeros(count, dtype=self.torch.float32, device=self.device)
            except Exception as exc:
                failure = exc
        if self.agree_max([1.0 if failure is not None else 0.0])[0]:
            if failure is not None:
                size = count * FLOAT32_BYTES
                raise RuntimeError(f"cannot allocate {size} bytes for {what}: {_error_text(failure)}")
            raise StoppedByPeer(f"another rank could not allocate memory for {what}")
        return buffer

    def memory_cap(self, max_bytes: int) -> int:
        """The largest message every rank can hold: a quarter of the least free GPU memory (the
        sweep holds a buffer and, while it checks the sums, a byte per element; the rest is left
        to the communicator's own buffers and to whatever else shares the GPU)."""
        if not self.cuda:
            return max_bytes
        free, _ = self.torch.cuda.mem_get_info(self.device)
        fits = int(self.agree_min([float(free) / 4])[0])
        return min(max_bytes, max(SWEEP_START_BYTES, fits))

    def barrier(self, group: Any = None) -> None:
        # A one-element all-reduce works on every backend and device, without the device
        # guessing that dist.barrier does for NCCL.
        tensor = self.torch.zeros(1, device=self.device)
        self.dist.all_reduce(tensor, group=group or self.group)
        self.sync()

    def gather(self, value: Any) -> list[Any]:
        """``value`` (plain JSON data) from every rank, by rank.

        Not ``all_gather_object``: it needs numpy, which a training environment may lack.
        """
        torch = self.torch
        data = json.dumps(value).encode("utf-8")
        size = torch.tensor([len(data)], dtype=torch.int64, device=self.device)
        sizes = [torch.zeros_like(size) for _ in range(self.world)]
        self.dist.all_gather(sizes, size, group=self.group)
        lengths = [int(s.item()) for s in sizes]
        padded = torch.zeros(max(lengths), dtype=torch.uint8)
        padded[: len(data)] = torch.frombuffer(bytearray(data), dtype=torch.uint8)
        padded = padded.to(self.device)
        gathered = [torch.empty_like(padded) for _ in range(self.world)]
        self.dist.all_gather(gathered, padded, group=self.group)
        pieces = [_tensor_bytes(gathered[i][: lengths[i]]) for i in range(self.world)]
        return [json.loads(piece.decode("utf-8")) for piece in pieces]

    def time_ops(self, buffer: Any, count: int, group: Any = None, aligned: bool = False) -> float:
        """Seconds per in-place all-reduce of ``buffer`` over ``count`` back-to-back ops, on this rank.

        The ranks start the clock together: after a barrier, or, when ``aligned``, because they
        have just left a collective of the group together (an agreement), which is one."""
        if aligned:
            self.sync()
        else:
            self.barrier(group)
        start = time.perf_counter()
        for _ in range(count):
            self.dist.all_reduce(buffer, group=group or self.group)
        self.sync()
        return (time.perf_counter() - start) / count

    # ---- start

    def start(self) -> None:
        _log(
            RANK_MARKER,
            {
                "rank": self.rank,
                "node_rank": self.node_rank,
                "local_rank": self.local_rank,
                "hostname": self.hostname,
                "pid": os.getpid(),
            },
        )
        if str(self.args.get("device", "cpu")) == "cuda" and not self.cuda:
            version = getattr(self.torch, "__version__", "?")
            raise RuntimeError(f"CUDA is not available to torch {version} on {self.hostname}")
        if self.cuda:
            self.torch.cuda.set_device(self.local_rank)
        enter_phase("join")
        join_s = self.join_timeout_s
        if self.rank != 0:
            # The time spent waiting for the master counts against the join's deadline.
            began = time.monotonic()
            master = (os.environ.get("MASTER_ADDR", ""), int(os.environ.get("MASTER_PORT", "0")))
            wait_for_master(*master, min(MASTER_WAIT_S, join_s / 2), self.world)
            join_s -= time.monotonic() - began
        self.dist.init_process_group(self.backend, timeout=timedelta(seconds=join_s))
        self.world = self.dist.get_world_size()
        self.rank = self.dist.get_rank()
        # Every rank creates the same groups in the same order, as new_group requires.
        collective = timedelta(seconds=self.timeout_s)
        self.group = self.dist.new_group(timeout=collective)
        self.side = (
            self.dist.new_group(backend="gloo", timeout=collective) if self.backend != "gloo" else self.group
        )
        device_name = self.torch.cuda.get_device_name(self.local_rank) if self.cuda else "cpu"
        me = {
            "rank": self.rank,
            "node_rank": self.node_rank,
            "local_rank": self.local_rank,
            "hostname": self.hostname,
            "device_name": device_name,
        }
        if self.backend == "nccl":
            me["nccl_loaded"] = loaded_nccl(self.torch)
        self.ranks = sorted(self.gather(me), key=lambda r: int(r["rank"]))
        for info in self.ranks:
            self.ranks_of_node.setdefault(int(info["node_rank"]), []).append(int(info["rank"]))
        self.usable = True

    # ---- all-reduce

    def sweep(self, settings: Mapping[str, Any]) -> JsonDict:
        budget = float(settings["sweep_budget_s"])
        warmup = int(settings["warmup_iters"])
        iters = max(1, int(settings["iters"]))
        asked = int(settings["max_bytes"])
        capped = self.memory_cap(asked)
        sizes = sweep_sizes(capped, factor=int(settings.get("sweep_factor", 2)))
        # What this rank puts in for the correctness check, and the sums every element must reach.
        pattern = [pattern_values(k, self.rank) for k in range(PATTERN_PERIOD)]
        sums = expected_sums(self.world)
        rows: list[JsonDict] = []
        stopped: str | None = None
        start = time.perf_counter()
        elapsed = 0.0
        last_per_op = 0.0
        for size in sizes:
            if rows:
                # The next size takes about as much longer per op as it is larger; it needs a
                # probe, one timed op and the check, or the sweep stops growing here.
                estimate = last_per_op * size / rows[-1]["size_bytes"]
                if elapsed + 3.0 * estimate > budget:
                    stopped = f"the {budget:g} s budget would run out at {size} bytes"
                    break
            count = size // FLOAT32_BYTES
            buffer = self.allocate(count, f"the {size}-byte sweep message")
            # The probe op is also the correctness check: every rank puts in its own values, and
            # every element must come back as their exact sum. A wrong element anywhere counts.
            fill_periodic(self.torch, buffer, pattern)
            probe_local = self.time_ops(buffer, 1, aligned=True)  # allocate() agreed
            wrong_local = count_unlike(self.torch, buffer, sums)
            buffer.zero_()  # the timed ops add zeros, which no number of ops can overflow
            probe, elapsed = self.agree_max([probe_local, time.perf_counter() - start])
            remaining = budget - elapsed
            if rows and remaining < 2.0 * probe:
                stopped = f"the {budget:g} s budget ran out at {size} bytes"
                break
            # As nccl-tests does, the warm-ups run once, before the first size; at every later
            # size the probe op is its only untimed op.
            warm, timed = plan_iterations(probe, remaining, 0 if rows else max(0, warmup - 1), iters)
            for _ in range(warm):
                self.dist.all_reduce(buffer, group=self.group)
            per_op_local = self.time_ops(buffer, timed, aligned=warm == 0)
            del buffer
            per_op, elapsed, wrong = self.agree_max(
                [per_op_local, time.perf_counter() - start, float(wrong_local)]
            )
            last_per_op = per_op
            algbw, busbw = bus_bandwidth(size, per_op, self.world)
            rows.append(
                {
                    "size_bytes": size,
                    "count": count,
                    "warmup_iters": warm + 1,
                    "iters": timed,
                    "time_s": per_op,
                    "algbw_gbps": algbw,
                    "busbw_gbps": busbw,
                    "wrong": int(wrong),
                }
            )
        return {
            "sweep": rows,
            "sweep_budget_s": budget,
            "sweep_max_bytes": sizes[-1],
            "sweep_complete": bool(rows) and rows[-1]["size_bytes"] == sizes[-1],
            "sweep_stopped": stopped,
            "memory_cap_bytes": capped if capped < asked else None,
            "sweep_duration_s": time.perf_counter() - start,
        }

    def pair_group(self, pair: Pair) -> Any:
        """The pair's communicator: made on first use by every rank in the same order (as
        new_group requires), reused by re-tests."""
        if pair not in self.pair_groups:
            ranks = sorted(self.ranks_of_node.get(pair[0], []) + self.ranks_of_node.get(pair[1], []))
            self.pair_groups[pair] = self.dist.new_group(ranks, timeout=timedelta(seconds=self.timeout_s))
        return self.pair_groups[pair]

    def destroy_pair_groups(self) -> None:
        for group in self.pair_groups.values():
            self.dist.destroy_process_group(group)
        self.pair_groups.clear()

    def pair_rounds(
        self,
        rounds: Sequence[Sequence[Sequence[int]]],
        settings: Mapping[str, Any],
        first_round: int,
        retest: bool,
    ) -> list[JsonDict]:
        """Run rounds of pair tests (the pairs of a round at once, all at one message size that the
        whole world agrees on, so that pairs compare like with like); every rank returns every
        measurement. A pair's budget counts its communicator's start-up."""
        plan = [[pair_key(int(a), int(b)) for a, b in pairs] for pairs in rounds]
        for pairs in plan:
            for pair in pairs:
                self.pair_group(pair)
        torch = self.torch
        target = max(FLOAT32_BYTES, int(settings["pair_bytes"]) // FLOAT32_BYTES * FLOAT32_BYTES)
        budget = float(settings["pair_budget_s"])
        probe_bytes = min(target, PAIR_PROBE_BYTES)
        local: list[JsonDict] = []
        for index, pairs in enumerate(plan):
            mine = next((p for p in pairs if self.node_rank in p), None)
            group = self.pair_groups[mine] if mine is not None else None
            started = time.perf_counter()
            proposal = float(target)
            if group is not None:
                small = torch.zeros(probe_bytes // FLOAT32_BYTES, dtype=torch.float32, device=self.device)
                # The first op connects the pair's communicator (NCCL makes it lazily): it counts
                # against the budget, but not as a measurement.
                self.dist.all_reduce(small, group=group)
                probe_local = self.time_ops(small, 1, group, aligned=True)
                probe, spent = self.agree_max([probe_local, time.perf_counter() - started], group)
                proposal = float(pair_size(target, probe_bytes, probe, max(budget - spent, budget / 3)))
            size = int(self.agree_min([proposal])[0])
            buffer = self.allocate(size // FLOAT32_BYTES, f"the {size}-byte pair message", group is not None)
            if mine is not None and group is not None:
                ranks = sorted(self.ranks_of_node.get(mine[0], []) + self.ranks_of_node.get(mine[1], []))
                probe_local = self.time_ops(buffer, 1, group, aligned=True)  # allocate() agreed
                probe, spent = self.agree_max([probe_local, time.perf_counter() - started], group)
                _, timed = plan_iterations(probe, budget - spent, 0, max(1, int(settings["iters"])))
                per_op_local = self.time_ops(buffer, timed, group, aligned=True)
                local.append(
                    {"size_bytes": size, "iters": timed, "time_s": per_op_local,
                     "round": first_round + index, "nodes": list(mine), "ranks": ranks}
                )  # fmt: skip
            del buffer
            # Rounds must not overlap: a pair still running would slow the next round's pairs.
            self.barrier()
        by_pair: dict[tuple[int, int, int], JsonDict] = {}
        for rank_results in self.gather(local):
            for result in rank_results:
                key = (int(result["round"]), int(result["nodes"][0]), int(result["nodes"][1]))
                known = by_pair.get(key)
                # The pair's time is its slowest rank's: a pair runs at its slowest member's pace.
                # (nccl-tests averages over ranks by default, -a 1; -a 3 takes the maximum, as here.)
                if known is None or result["time_s"] > known["time_s"]:
                    by_pair[key] = result
        measurements: list[JsonDict] = []
        for key in sorted(by_pair):
            result = by_pair[key]
            algbw, busbw = bus_bandwidth(
                int(result["size_bytes"]), float(result["time_s"]), len(result["ranks"])
            )
            measurements.append(
                {
                    "round": result["round"],
                    "nodes": result["nodes"],
                    "ranks": result["ranks"],
                    "size_bytes": result["size_bytes"],
                    "iters": result["iters"],
                    "time_s": result["time_s"],
                    "algbw_gbps": algbw,
                    "busbw_gbps": busbw,
                    "retest": retest,
                }
            )
        return measurements

    def allreduce(self) -> JsonDict:
        settings = dict(DEFAULT_ALLREDUCE)
        settings.update(self.args.get("allreduce") or {})
        start = time.perf_counter()
        result = self.sweep(settings)
        pairs: list[JsonDict] = []
        rounds = settings.get("rounds") or []
        if settings.get("pairwise") and rounds and len(self.ranks_of_node) >= 2:
            pair_start = time.perf_counter()
            pairs = self.pair_rounds(rounds, settings, 0, retest=False)
            # Every rank has the same measurements, so every rank plans the same re-tests.
            plan = retest_plan(
                first_busbw(pairs),
                float(settings["slow_ratio"]),
                float(settings.get("quiet_slow_ratio", QUIET_SLOW_RATIO)),
            )
            if plan:
                pairs += self.pair_rounds(plan, settings, len(rounds), retest=True)
                sides = side_plan(
                    pairs,
                    float(settings["slow_ratio"]),
                    float(settings.get("quiet_slow_ratio", QUIET_SLOW_RATIO)),
                )
                if sides:
                    pairs += self.pair_rounds(sides, settings, len(rounds) + len(plan), retest=True)
                plan += sides
            result["pairs_duration_s"] = time.perf_counter() - pair_start
            result["retest_rounds"] = [[list(p) for p in r] for r in plan]
            if "pair_seed" in settings:
                result["pair_seed"] = settings["pair_seed"]
            self.destroy_pair_groups()
        result["pairs"] = pairs
        result["duration_s"] = time.perf_counter() - start
        return result

    # ---- compute

    def compute(self) -> JsonDict:
        """Every rank burns matrix multiplications at once for the same time (node_compute.py);
        every rank's throughput and what its GPU said, by rank."""
        settings = dict(DEFAULT_COMPUTE)
        settings.update(self.args.get("compute") or {})
        burner = load_companion("compute")
        burn_s = float(settings["burn_s"])
        start = time.perf_counter()
        self.barrier()
        mine = burner.burn(self.torch, self.device, self.cuda, burn_s, int(settings["matrix"] or 0))
        mine.update(
            rank=self.rank, node_rank=self.node_rank, local_rank=self.local_rank, hostname=self.hostname
        )
        ranks = self.gather(mine)
        return {"burn_s": burn_s, "ranks": ranks, "duration_s": time.perf_counter() - start}

    def intranode(self) -> JsonDict:
        """An all-reduce among the ranks of each node, every node at once (its own path: NVLink,
        NVSwitch, PCIe or, between CPU processes, the loopback), and each GPU's host-device copies."""
        settings = dict(DEFAULT_INTRANODE)
        settings.update(self.args.get("intranode") or {})
        start = time.perf_counter()
        local = sorted((node, ranks) for node, ranks in self.ranks_of_node.items() if len(ranks) >= 2)
        # Every rank makes every group, in the same order, as new_group requires.
        groups = {
            node: self.dist.new_group(ranks, timeout=timedelta(seconds=self.timeout_s))
            for node, ranks in local
        }
        mine: JsonDict = {"rank": self.rank, "node_rank": self.node_rank}
        group = groups.get(self.node_rank)
        if groups:
            count = max(1, int(settings["size_bytes"]) // FLOAT32_BYTES)
            buffer = self.allocate(count, "the inside-the-node message", group is not None)
            if group is not None:
                self.dist.all_reduce(buffer, group=group)  # connects the group
                # The best of a few trials: a path that is slow stays slow in every trial, while a
                # busy moment on a shared host spoils only one.
                iters = max(1, int(settings["iters"]))
                best = min(self.time_ops(buffer, iters, group) for _ in range(INTRANODE_TRIALS))
                per_op = self.agree_max([best], group)[0]
                size = count * FLOAT32_BYTES
                n_local = len(self.ranks_of_node[self.node_rank])
                mine.update(
                    size_bytes=size, time_s=per_op, busbw_gbps=bus_bandwidth(size, per_op, n_local)[1]
                )
            del buffer
        if self.cuda:
            mine["copy"] = load_companion("compute").copy_bandwidth(
                self.torch, self.device, int(settings["copy_bytes"]), 5
            )
        self.barrier()
        for made in groups.values():
            self.dist.destroy_process_group(made)
        skipped = None if local else "one process per node: no path inside a node to measure"
        return {"ranks": self.gather(mine), "skipped": skipped, "duration_s": time.perf_counter() - start}

    # ---- DDP

    def ddp(self) -> JsonDict:
        torch = self.torch
        dist = self.dist
        settings = dict(DEFAULT_DDP)
        settings.update(self.args.get("ddp") or {})
        steps = max(1, int(settings["steps"]))
        start = time.perf_counter()
        # Join check: gloo's monitored barrier (on a gloo side group when the job runs NCCL) names
        # the ranks that did not arrive.
        dist.monitored_barrier(
            group=self.side, timeout=timedelta(seconds=self.timeout_s), wait_all_ranks=True
        )
        ones = torch.ones(1, device=self.device)
        dist.all_reduce(ones, group=self.group)
        ones_value = float(ones.item())

        torch.manual_seed(DDP_SEED)
        model = torch.nn.Sequential(
            torch.nn.Linear(DDP_IN, DDP_HIDDEN), torch.nn.Tanh(), torch.nn.Linear(DDP_HIDDEN, 1)
        ).to(self.device)
        teacher = torch.Generator().manual_seed(DDP_SEED + 1)
        true_weights = torch.randn(DDP_IN, 1, generator=teacher)
        data = torch.Generator().manual_seed(DDP_SEED + 2 + self.rank)  # different data on every rank

        def batch() -> tuple[Any, Any]:
            x = torch.randn(DDP_BATCH, DDP_IN, generator=data)
            y = torch.tanh(x @ true_weights) + 0.01 * torch.randn(DDP_BATCH, 1, generator=data)
            return x.to(self.device), y.to(self.device)

        wrapped = torch.nn.parallel.DistributedDataParallel(
            model, device_ids=[self.local_rank] if self.cuda else None, process_group=self.group
        )
        optimizer = torch.optim.SGD(wrapped.parameters(), lr=DDP_LR)
        loss_fn = torch.nn.MSELoss()
        losses: list[float] = []
        wall: list[float] = []
        for _ in range(steps):
            x, y = batch()
            self.sync()
            begin = time.perf_counter()
            optimizer.zero_grad()
            loss = loss_fn(wrapped(x), y)
            loss.backward()
            optimizer.step()
            self.sync()
            wall.append(time.perf_counter() - begin)
            global_loss = loss.detach().clone()
            dist.all_reduce(global_loss, group=self.group)
            losses.append(float(global_loss.item()) / self.world)

        params = [p.detach() for p in model.parameters()]
        grads = [p.grad.detach() for p in model.parameters() if p.grad is not None]
        mine = {
            "param_checksum": float(sum(float(p.double().sum().item()) for p in params)),
            "grad_checksum": float(sum(float(g.double().sum().item()) for g in grads)),
            "param_hash": _tensor_hash(params),
            "grad_hash": _tensor_hash(grads),
            "wall_step_s": float(statistics.median(wall)),
            "compute_step_s": self.compute_step(model, loss_fn, batch),
        }
        everyone = self.gather(mine)
        return {
            "steps": steps,
            "losses": losses,
            "loss_first": losses[0],
            "loss_last": losses[-1],
            "joined": round(ones_value),  # every rank that joined added its 1
            "compute_work": (
                f"{COMPUTE_GPU_DIM}x{COMPUTE_GPU_DIM} half-precision layer, forward+backward, CUDA events"
                if self.cuda
                else f"{DDP_IN}-{DDP_HIDDEN}-1 MLP forward+backward on CPU"
            ),
            "ones_allreduce": ones_value,
            "param_checksums": [r["param_checksum"] for r in everyone],
            "grad_checksums": [r["grad_checksum"] for r in everyone],
            "param_hashes": [r["param_hash"] for r in everyone],
            "grad_hashes": [r["grad_hash"] for r in everyone],
            "compute_step_s": [r["compute_step_s"] for r in everyone],
            "wall_step_s": [r["wall_step_s"] for r in everyone],
            "duration_s": time.perf_counter() - start,
        }

    def compute_step(self, model: Any, loss_fn: Any, batch: Any) -> float:
        """Median seconds of a forward+backward on a local copy: this rank's compute, no all-reduce wait.

        Under DDP every rank's step ends when the slowest rank's gradients arrive, so wall
        step times are all equal; a straggler shows only in its own compute.
        """
        if self.cuda:
            return self.gpu_compute_step()
        local = copy.deepcopy(model)
        self.barrier()
        times: list[float] = []
        for _ in range(COMPUTE_TIMING_STEPS):
            x, y = batch()
            self.sync()
            begin = time.perf_counter()
            local.zero_grad()
            loss_fn(local(x), y).backward()
            self.sync()
            times.append(time.perf_counter() - begin)
        return float(statistics.median(times))

    def gpu_compute_step(self) -> float:
        """Median seconds of a forward+backward of one COMPUTE_GPU_DIM-square bf16 (or fp16) layer,
        timed with CUDA events; every rank agrees it could run before any rank gathers the result."""
        torch = self.torch
        times: list[float] = []
        failure: Exception | None = None
        try:
            dtype = torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
            layer = torch.nn.Linear(
                COMPUTE_GPU_DIM, COMPUTE_GPU_DIM, bias=False, device=self.device, dtype=dtype
            )
            x = torch.randn(COMPUTE_GPU_DIM, COMPUTE_GPU_DIM, device=self.device, dtype=dtype)
            for step in range(COMPUTE_TIMING_STEPS + 1):  # the first step warms up cuBLAS
                start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                start.record()
                layer.zero_grad(set_to_none=True)
                layer(x).sum().backward()
                end.record()
                end.synchronize()
                if step:
                    times.append(start.elapsed_time(end) / 1000.0)  # elapsed_time is in ms
            del layer, x
        except Exception as exc:
            failure = exc
        if self.agree_max([1.0 if failure is not None else 0.0])[0]:
            if failure is not None:
                raise RuntimeError(f"the GPU compute timing failed: {_error_text(failure)}")
            raise StoppedByPeer("another rank's GPU compute timing failed")
        return float(statistics.median(times))

    # ---- phases and the document

    def run_phase(self, name: str, phase: Any, document: JsonDict, errors: JsonDict) -> None:
        """Run one phase on every rank; afterwards all ranks agree whether any failed."""
        if self.local_rank == 0:
            _log(PHASE_MARKER, {"phase": name, "node_rank": self.node_rank, "rank": self.rank})
        enter_phase(name)
        error: str | None = None
        try:
            document[name] = phase()
        except StoppedByPeer:
            pass  # the rank that failed says why
        except Exception as exc:
            error = _error_text(exc)
            traceback.print_exc(file=sys.stderr)
        try:
            # Agreement keeps ranks in lock-step: a rank that failed alone is known to all.
            reported = self.gather(error)
        except Exception as exc:
            self.usable = False
            if error is None:
                error = f"the process group stopped answering after this phase: {_error_text(exc)}"
            errors[name] = f"rank {self.rank} ({self.hostname}): {error}"
            return
        failed = [(rank, message) for rank, message in enumerate(reported) if message is not None]
        if failed:
            errors[name] = "; ".join(f"rank {rank}: {message}" for rank, message in failed[:4])
            if len(failed) > 4:
                errors[name] += f"; and {len(failed) - 4} more ranks"
            document.pop(name, None)

    def document(self, started: float) -> JsonDict:
        return {
            "job_version": JOB_VERSION,
            "world_size": self.world,
            "nodes": list(self.args.get("nodes") or []),
            "backend": self.backend,
            "device": "cuda" if self.cuda else "cpu",
            "torch": str(getattr(self.torch, "__version__", "")),
            "ranks": self.ranks,
            "phase_errors": {},
            "duration_s": time.perf_counter() - started,
        }


def _tensor_bytes(tensor: Any) -> bytes:
    """The raw bytes of a tensor, read from its CPU memory (no numpy needed)."""
    cpu = tensor.detach().to("cpu").contiguous()
    size = cpu.numel() * cpu.element_size()
    return ctypes.string_at(cpu.data_ptr(), size) if size else b""


def _tensor_hash(tensors: Sequence[Any]) -> str:
    digest = hashlib.sha256()
    for tensor in tensors:
        digest.update(_tensor_bytes(tensor))
    return digest.hexdigest()[:16]


def marked_lines(text: str, marker: str) -> list[dict[str, Any]]:
    """The JSON objects that follow ``marker`` on lines of ``text`` (other lines, and marked
    lines that are not a JSON object, are skipped)."""
    found: list[dict[str, Any]] = []
    for line in text.splitlines():
        at = line.find(marker)
        if at < 0:
            continue
        try:
            value = json.loads(line[at + len(marker) :])
        except ValueError:
            continue
        if isinstance(value, dict):
            found.append(value)
    return found


def parse_result_line(stdout: str) -> dict[str, Any] | None:
    """The document from a ``PREFLIGHT-JOB-RESULT`` line in rank 0's stdout (the last one wins)."""
    documents = marked_lines(stdout, RESULT_MARKER)
    return documents[-1] if documents else None


def _print_document(document: Mapping[str, Any]) -> None:
    _write_stdout_line(RESULT_MARKER + json.dumps(finite(dict(document)), sort_keys=True, default=str))


# --------------------------------------------------------------------------- this node's ranks
#
# The node's host (the facts probe that stayed, :func:`preflight.node.facts.serve`) runs this
# script with ``{"host": ..., "job": ...}``: it starts the node's ranks as torchrun would (the same
# variables), forked from itself, torch already imported, and watches them: when one fails, it
# ends the others at once; when the controller goes away (stdin ends) or ends it, it ends them all.

# Set by the host when it could not make its private TMPDIR (preflight.node.facts); the job then
# does not start, and the node exits with TMPDIR_FAILED.
TMPDIR_ERROR = "PREFLIGHT_TMPDIR_ERROR"
TMPDIR_FAILED = 70
# A rank's process name (ps, top, /proc/PID/comm), followed by its local rank.
RANK_COMM = "preflight-rank"
PR_SET_NAME = 15
# How long a rank has to end after TERM before it is killed.
RANK_TERM_GRACE_S = 3.0


def signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown"


def rank_environment(host: Mapping[str, Any], local_rank: int) -> dict[str, str]:
    """The variables one rank is started with: the job's, and torchrun's names for its place."""
    nproc = int(host["nproc"])
    env = {str(k): str(v) for k, v in (host.get("env") or {}).items()}
    env.update(
        RANK=str(int(host["rank_offset"]) + local_rank),
        LOCAL_RANK=str(local_rank),
        WORLD_SIZE=str(host["world_size"]),
        LOCAL_WORLD_SIZE=str(nproc),
        GROUP_RANK=str(host["node_rank"]),
        GROUP_WORLD_SIZE=str(host["nnodes"]),
        ROLE_RANK=str(int(host["rank_offset"]) + local_rank),
        ROLE_WORLD_SIZE=str(host["world_size"]),
        ROLE_NAME="default",
        MASTER_ADDR=str(host["master_addr"]),
        MASTER_PORT=str(host["master_port"]),
    )
    return env


def name_process(name: str) -> None:
    """Set this process's name as ps and top show it (Linux, 15 characters); best effort."""
    with contextlib.suppress(Exception):
        ctypes.CDLL(None).prctl(PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0)


def _run_rank(env: Mapping[str, str], job: Mapping[str, Any]) -> int:
    """In a forked child: become one rank and run the job."""
    status = 1
    try:
        name_process(f"{RANK_COMM}{env.get('LOCAL_RANK', '')}")
        for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(number, signal.SIG_DFL)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        os.close(devnull)
        os.environ.update(env)
        threads = env.get("OMP_NUM_THREADS", "")
        torch = sys.modules.get("torch")
        if torch is not None and threads.isdigit() and int(threads) > 0:
            torch.set_num_threads(int(threads))  # the library read the variable before the fork
        status = main(["preflight-job", json.dumps(job)])
    except BaseException:
        traceback.print_exc(file=sys.stderr)
    finally:
        with contextlib.suppress(Exception):
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(status)


def _spawn_rank(env: Mapping[str, str], job: Mapping[str, Any], source: bytes) -> int:
    """Start one rank in a fresh interpreter (when this process cannot fork one: CUDA started here)."""
    process = subprocess.Popen(
        [sys.executable, "-c", "import sys;exec(compile(sys.stdin.buffer.read(),'preflight-job','exec'))",
         json.dumps(job)],
        stdin=subprocess.PIPE, env={**os.environ, **env},
    )  # fmt: skip
    assert process.stdin is not None
    process.stdin.write(source)
    process.stdin.close()
    return process.pid


def _exit_code(status: int) -> int:
    if os.WIFSIGNALED(status):
        return -os.WTERMSIG(status)
    return os.WEXITSTATUS(status) if os.WIFEXITED(status) else 1


def _exit_fds(pids: Iterable[int]) -> dict[int, int]:
    """A descriptor per process that turns readable when it ends, for those the system gives one."""
    opener = getattr(os, "pidfd_open", None)
    if opener is None:
        return {}
    fds: dict[int, int] = {}
    for pid in pids:
        with contextlib.suppress(OSError):
            fds[pid] = opener(pid)
    return fds


def host(request: Mapping[str, Any], source: bytes | None) -> int:
    """Start this node's ranks and watch them to their end; the node's exit status."""
    settings = request["host"]
    job = request["job"]
    no_tmpdir = os.environ.get(TMPDIR_ERROR)
    if no_tmpdir:
        sys.stderr.write(f"preflight: {no_tmpdir}\n")
        return TMPDIR_FAILED
    ended: list[int] = []

    def end(number: int, frame: Any) -> None:
        ended.append(number)

    for number in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(number, end)
    with contextlib.suppress(Exception):  # a failed import: every rank reports it
        import torch  # noqa: F401  (already imported when the host stayed warm)
    torch_module = sys.modules.get("torch")
    # What the host imported stays shared with its forks: the collector must not touch (and so
    # copy) those objects in every rank.
    gc.freeze()
    fork = source is None or not (torch_module is not None and torch_module.cuda.is_initialized())
    ranks: dict[int, int] = {}
    for local_rank in range(int(settings["nproc"])):
        env = rank_environment(settings, local_rank)
        pid = os.fork() if fork else _spawn_rank(env, job, source or b"")
        if fork and pid == 0:
            _run_rank(env, job)
        ranks[pid] = local_rank
    failed: int | None = None
    term_sent: float | None = None
    killed = False
    stdin_open = True
    # Each rank's end wakes the loop at once where the system can say so (a pidfd, Linux 5.3
    # and Python 3.9 on); elsewhere the loop looks every 50 ms.
    exits = _exit_fds(ranks)
    while ranks:
        watched = ([0] if stdin_open else []) + [fd for pid, fd in exits.items() if pid in ranks]
        readable, _, _ = select.select(watched, [], [], 0.05 if len(exits) < len(ranks) else 0.2)
        if 0 in readable and not os.read(0, 4096):
            stdin_open = False
            ended.append(0)  # the controller went away: end the job here too
        while ranks:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                ranks.clear()
                break
            if pid == 0:
                break
            if pid not in ranks:
                continue
            local_rank = ranks.pop(pid)
            code = _exit_code(status)
            if code != 0 and failed is None and term_sent is None:
                failed = code
                rank = int(settings["rank_offset"]) + local_rank
                how = (
                    f"was ended by signal {-code} ({signal_name(-code)})"
                    if code < 0
                    else f"exited with status {code}"
                )
                sys.stderr.write(f"preflight-job: rank {rank} (local_rank {local_rank}, pid {pid}) {how}\n")
                sys.stderr.flush()
        if (failed is not None or ended) and term_sent is None and ranks:
            term_sent = time.monotonic()
            for pid in ranks:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGTERM)
        if term_sent is not None and not killed and time.monotonic() - term_sent > RANK_TERM_GRACE_S:
            killed = True
            for pid in ranks:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
    for fd in exits.values():
        os.close(fd)
    cleanup = globals().get("__preflight_cleanup__")
    if callable(cleanup):
        cleanup()  # this process ends with os._exit: its host's TMPDIR goes now
    if ended and failed is None:
        return 143
    return 0 if failed is None else 1


def main(argv: Sequence[str]) -> int:
    started = time.perf_counter()
    args: JsonDict = json.loads(argv[1]) if len(argv) > 1 else {}
    if "host" in args:
        return host(args, globals().get("__preflight_source__"))
    start_heartbeat()
    # torch's import keeps every object it makes: the collector would only walk them, over and
    # over (preflight.node.facts._import_quietly, which a warm host imported them with).
    collecting = gc.isenabled()
    gc.disable()
    try:
        import torch
        import torch.distributed as dist
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        if os.environ.get("RANK", "0") == "0":
            message = f"torch cannot be imported on {socket.gethostname()}: {_error_text(exc)}"
            _print_document({"job_version": JOB_VERSION, "phase_errors": {"init": message}})
            return 0
        return 1
    finally:
        gc.freeze()
        if collecting:
            gc.enable()

    job = Job(torch, dist, args)
    errors: JsonDict = {}
    document: JsonDict = {}
    try:
        job.start()
    except Exception as exc:
        traceback.print_exc(file=sys.stderr)
        errors["init"] = f"rank {job.rank} ({job.hostname}): {_error_text(exc)}"
    if job.usable:
        phases = {
            "compute": job.compute,
            "intranode": job.intranode,
            "allreduce": job.allreduce,
            "ddp": job.ddp,
        }
        for name in args.get("phases") or PHASES:
            if name not in phases:
                errors[name] = f"unknown phase {name!r}"
                continue
            if not job.usable:
                errors.setdefault(name, "not run: the process group stopped answering in an earlier phase")
                continue
            job.run_phase(name, phases[name], document, errors)
    enter_phase("finish")
    printed = False
    if job.rank == 0:
        result = job.document(started)
        result.update(document)
        result["phase_errors"] = errors
        result["duration_s"] = time.perf_counter() - started
        _print_document(result)
        printed = True
    try:
        if job.usable:
            # Nobody tears down while a peer still finishes its last collective.
            job.barrier()
        if dist.is_initialized():
            dist.destroy_process_group()
    except Exception as exc:
        sys.stderr.write(f"destroy_process_group failed: {_error_text(exc)}\n")
    if job.rank == 0:
        return 0 if printed else 1
    return 0 if job.usable or "init" not in errors else 1


if __name__ == "__main__":
    status = main(sys.argv)
    sys.stdout.flush()
    sys.stderr.flush()
    # No interpreter teardown: torch's C++ destructors (gloo's threads) can abort a process that
    # finished its work ("terminate called without an active exception"), failing a good job.
    os._exit(status)
