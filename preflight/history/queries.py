"""Reading the store back: repeat offenders by part and by node, findings that come and go, each
GPU's, node's and pair's rates over time, and what failed before for a run's own findings. The
``*_of`` forms answer for a run's own nodes and parts only, reading only their rows."""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, TypeVar

from preflight.history.schema import placeholders
from preflight.history.store import Store
from preflight.identity import short_hostname
from preflight.registry import kept_measures, kept_metrics

FAILED = "('fail', 'error')"


@dataclass(frozen=True)
class Filters:
    """``--since`` (ISO time), ``--node``, ``--part``: empty means any; ``--pairs``."""

    since: str = ""
    node: str = ""
    part: str = ""
    pairs: bool = False

    @property
    def with_pairs(self) -> bool:
        """Whether the pairs' trends are read: with ``--pairs``, or ``--node`` (its own pairs only).
        A sparse plan draws other pairs each run: at 1,000 nodes they are nearly all of the
        trends (300,000 in 30 days)."""
        return self.pairs or bool(self.node)

    def where(
        self, *, node_column: str = "node", part_column: str | None = "part", pairs: bool = False
    ) -> tuple[str, list[Any]]:
        """``pairs``: the rates table, where ``--node`` is either name of a pair's rate too."""
        clauses, params = ["started_at >= ?"], [self.since]
        if self.node and pairs:
            metrics = kept_metrics("pair")
            clauses.append(f"({node_column} = ? OR (metric IN ({placeholders(metrics)}) AND part = ?))")
            params += [self.node, *metrics, self.node]
        elif self.node:
            clauses.append(f"{node_column} = ?")
            params.append(self.node)
        if self.part and part_column:
            clauses.append(f"{part_column} = ?")
            params.append(self.part)
        return " AND ".join(clauses), params


@dataclass(frozen=True)
class Failure:
    started_at: str
    node: str
    part: str | None
    check: str
    cause: str
    status: str


@dataclass
class Offender:
    """A part that failed on several nodes (``by`` "part"), or a node that failed with several
    parts (``by`` "node"): the failures, oldest first."""

    by: str
    name: str
    others: list[str]  # the nodes the part failed on, or the parts the node failed with
    failures: list[Failure] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "by": self.by,
            "name": self.name,
            "others": self.others,
            "failures": [asdict(f) for f in self.failures],
        }


def _failures(store: Store, filters: Filters, *, with_part: bool) -> list[Failure]:
    where, params = filters.where()
    if with_part:
        where += " AND part IS NOT NULL"
    rows = store.query(
        f"SELECT started_at, node, part, check_name, cause, status FROM findings WHERE {where}"
        f" AND status IN {FAILED} ORDER BY started_at",
        params,
    )
    return [Failure(*row) for row in rows]


def offenders(store: Store, filters: Filters) -> list[Offender]:
    """Parts that failed on more than one node (the fault follows the part), then nodes that failed
    with more than one part (the fault stays with the node: its slot, riser, cable or board)."""
    return _offenders_among(_failures(store, filters, with_part=True))


def offenders_of(store: Store, since: str, nodes: Sequence[str], parts: Sequence[str]) -> list[Offender]:
    """The repeat offenders among ``nodes`` (by node) and ``parts`` (by part, with their failures on
    any node) since ``since``: what :func:`offenders` answers for them."""
    failures: list[Failure] = []
    node_set = set(nodes)
    for column, values in (("node", node_set), ("part", set(parts))):
        for chunk in _chunks(sorted(values), 500):
            marks = placeholders(chunk)
            rows = store.query(
                "SELECT started_at, node, part, check_name, cause, status FROM findings WHERE"
                f" started_at >= ? AND part IS NOT NULL AND status IN {FAILED} AND {column} IN ({marks})",
                [since, *chunk],
            )
            # A part's failures on the run's nodes came with the nodes' own.
            failures += [Failure(*row) for row in rows if column == "node" or row[1] not in node_set]
    failures.sort(key=lambda f: f.started_at)
    found = _offenders_among(failures)
    return [o for o in found if o.name in (node_set if o.by == "node" else set(parts))]


def _offenders_among(failures: Sequence[Failure]) -> list[Offender]:
    by_part: dict[str, list[Failure]] = {}
    by_node: dict[str, list[Failure]] = {}
    for failure in failures:
        assert failure.part is not None
        by_part.setdefault(failure.part, []).append(failure)
        by_node.setdefault(failure.node, []).append(failure)
    found = []
    for part, its in sorted(by_part.items()):
        nodes = list(dict.fromkeys(f.node for f in its))
        if len(nodes) > 1:
            found.append(Offender("part", part, nodes, its))
    for node, its in sorted(by_node.items()):
        parts = list(dict.fromkeys(f.part for f in its if f.part))
        if len(parts) > 1:
            found.append(Offender("node", node, parts, its))
    return found


@dataclass(frozen=True)
class Flaky:
    """A finding that came and went: failed, then passed on the same node, then failed again."""

    key: str
    node: str
    failed: int  # runs it failed in
    checked: int  # runs that checked the node since its first failure

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def flaky(store: Store, filters: Filters) -> list[Flaky]:
    where, params = filters.where(part_column=None)
    rows = store.query(f"SELECT finding_key, node, run_id FROM findings WHERE {where}", params)
    return _flaky_among(store, rows, filters.since)


def flaky_of(store: Store, since: str, nodes: Sequence[str]) -> list[Flaky]:
    """The findings that came and went on ``nodes`` since ``since``: what :func:`flaky` answers
    for them."""
    rows: list[tuple[Any, ...]] = []
    for chunk in _chunks(sorted(set(nodes)), 500):
        marks = placeholders(chunk)
        rows += store.query(
            f"SELECT finding_key, node, run_id FROM findings WHERE started_at >= ? AND node IN ({marks})",
            [since, *chunk],
        )
    return _flaky_among(store, rows, since)


def _flaky_among(store: Store, rows: Sequence[tuple[Any, ...]], since: str) -> list[Flaky]:
    failed_in: dict[tuple[str, str], set[int]] = {}
    for key, node, run_id in rows:
        failed_in.setdefault((key, node), set()).add(int(run_id))
    repeated = {k: runs for k, runs in failed_in.items() if len(runs) > 1}
    if not repeated:
        return []
    nodes = sorted({node for _, node in repeated})
    checked_in = _runs_checking(store, nodes, since)
    found = []
    for (key, node), runs in sorted(repeated.items()):
        seen = [r for r in checked_in.get(node, []) if r >= min(runs)]
        between = [r for r in seen if min(runs) < r < max(runs) and r not in runs]
        if between:
            found.append(Flaky(key, node, len(runs), len(seen)))
    return found


def _runs_checking(store: Store, nodes: Sequence[str], since: str) -> dict[str, list[int]]:
    """Node -> the runs since ``since`` that reached it, in order of their ids. The window's runs
    are read once and the nodes' rows by the nodes' index alone, not joined with the runs row by
    row (at 1,000 nodes and 180 runs: 180,000 rows)."""
    window = {int(run_id) for (run_id,) in store.query("SELECT id FROM runs WHERE started_at >= ?", [since])}
    if not window:
        return {}
    found: dict[str, list[int]] = {}
    for chunk in _chunks(nodes, 500):
        marks = placeholders(chunk)
        rows = store.query(
            f"SELECT node, run_id FROM nodes WHERE reachable = 1 AND run_id >= ? AND node IN ({marks})",
            [min(window), *chunk],
        )
        for node, run_id in rows:
            if run_id in window:
                found.setdefault(node, []).append(int(run_id))
    return {node: sorted(runs) for node, runs in found.items()}


_Item = TypeVar("_Item")


def _chunks(items: Sequence[_Item], size: int) -> Iterable[Sequence[_Item]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


@dataclass(frozen=True)
class Trend:
    """One GPU's compute rate (TFLOPS), one node's or one pair's bus bandwidth (GB/s) over the
    window."""

    metric: str
    node: str
    part: str
    runs: int
    mean: float
    low: float
    high: float
    first_at: str
    last_at: str

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def trends(store: Store, filters: Filters) -> list[Trend]:
    """The trends of every rate the filters match, the pairs' only where
    :attr:`Filters.with_pairs`."""
    where, params = filters.where(pairs=True)
    if not filters.with_pairs:
        metrics = kept_metrics("node", "gpu")
        where += f" AND metric IN ({placeholders(metrics)})"
        params += metrics
    rows = store.query(
        "SELECT metric, node, part, COUNT(*), AVG(value), MIN(value), MAX(value), MIN(started_at),"
        f" MAX(started_at) FROM rates WHERE {where} GROUP BY metric, node, part ORDER BY metric, node, part",
        params,
    )
    return [
        Trend(m, n, p, int(c), float(a), float(lo), float(hi), f, la) for m, n, p, c, a, lo, hi, f, la in rows
    ]


@dataclass(frozen=True)
class Mean:
    """A rate's runs and mean over the window: what a report needs of a trend it does not draw."""

    metric: str
    node: str
    part: str
    runs: int
    mean: float


def means_of(
    store: Store,
    since: str,
    nodes: Sequence[str],
    parts: Sequence[str],
    pairs: Iterable[tuple[str, str, str]],
) -> list[Mean]:
    """The runs and mean since ``since`` of ``nodes``' rates (a node's bus bandwidth), of
    ``parts``' (a GPU's compute rate) and of the ``pairs``' rates ((metric, node, part), the pair's
    names sorted), ordered by metric, node and part. Two aggregates read from the
    rates' index take half the time of the six of a :class:`Trend`. A sparse plan draws other pairs
    each run: only the given ones are read, not every pair the nodes ever made."""
    part_set = set(parts)
    found: list[Mean] = []
    for measure in kept_measures().values():
        if measure.entity == "pair":
            continue
        metric = measure.metric
        for chunk in _chunks(sorted(set(nodes)), 500):
            marks = placeholders(chunk)
            rows = store.query(
                f"SELECT node, part, COUNT(*), AVG(value) FROM rates WHERE metric = ? AND node IN ({marks})"
                " AND started_at >= ? GROUP BY node, part",
                [metric, *chunk, since],
            )
            found += [
                Mean(metric, n, p, int(c), float(a))
                for n, p, c, a in rows
                if measure.entity != "gpu" or p in part_set
            ]
    wanted = sorted(set(pairs))
    for (metric, node, part), (c, a) in _per_series(store, "COUNT(*), AVG(value)", wanted, since):
        if c:
            found.append(Mean(metric, node, part, int(c), float(a)))
    return sorted(found, key=lambda m: (m.metric, m.node, m.part))


def trends_by_key(store: Store, since: str, keys: Sequence[tuple[str, str, str]]) -> list[Trend]:
    """The trends of the (metric, node, part) ``keys`` since ``since``: what :func:`trends`
    answers for them."""
    columns = "COUNT(*), AVG(value), MIN(value), MAX(value), MIN(started_at), MAX(started_at)"
    found = [
        Trend(metric, node, part, int(c), float(a), float(lo), float(hi), f, la)
        for (metric, node, part), (c, a, lo, hi, f, la) in _per_series(store, columns, keys, since)
        if c
    ]
    return sorted(found, key=lambda t: (t.metric, t.node, t.part))


def latest_values(
    store: Store, since: str, keys: Sequence[tuple[str, str, str]], points: int
) -> dict[tuple[str, str, str], list[float]]:
    """(metric, node, part) -> its last ``points`` values since ``since``, oldest first."""
    found: dict[tuple[str, str, str], list[float]] = {}
    for key in keys:
        rows = store.query(
            "SELECT value FROM rates WHERE metric = ? AND node = ? AND part = ? AND started_at >= ?"
            " ORDER BY started_at DESC LIMIT ?",
            [*key, since, points],
        )
        found[key] = [float(v) for (v,) in reversed(rows)]
    return found


def _per_series(
    store: Store, columns: str, keys: Sequence[tuple[str, str, str]], since: str
) -> Iterable[tuple[tuple[str, str, str], tuple[Any, ...]]]:
    """``columns`` (aggregates) of each series in ``keys`` since ``since``: on SQLite one query a
    series (in-process, each a seek on the rates' index), on PostgreSQL one query a few hundred
    series (a join with their names, not a round trip each)."""
    if store.dialect == "sqlite":
        for key in keys:
            rows = store.query(
                f"SELECT {columns} FROM rates WHERE metric = ? AND node = ? AND part = ? AND started_at >= ?",
                [*key, since],
            )
            yield key, rows[0]
        return
    for start in range(0, len(keys), 500):
        chunk = keys[start : start + 500]
        values = ", ".join("(?, ?, ?)" for _ in chunk)
        rows = store.query(
            f"WITH wanted (m, n, p) AS (VALUES {values}) SELECT metric, node, part, {columns}"
            " FROM rates JOIN wanted ON metric = m AND node = n AND part = p WHERE started_at >= ?"
            " GROUP BY metric, node, part",
            [*(x for key in chunk for x in key), since],
        )
        for metric, node, part, *rest in rows:
            yield (metric, node, part), tuple(rest)


def recent_series(
    store: Store, metric: str, keys: Sequence[tuple[str, str]], since: str, before: str, last: int
) -> dict[tuple[str, str], list[float]]:
    """(node, part) -> the last ``last`` values of ``metric`` of each of ``keys`` in the runs from
    ``since`` to before ``before``, oldest first (a key without any is left out).

    Each series is read by a seek into the rates' index (metric, node, part, started_at) that stops
    after ``last`` rows, so the cost follows the parts asked about, not the window's every value:
    at 1,000 nodes x 8 GPUs x 180 runs the window holds 1.6 million values. SQLite is asked once a
    series (in process: no round trip); PostgreSQL once for 500 series, by a lateral join."""
    found: dict[tuple[str, str], list[float]] = {}
    wanted = sorted(set(keys))
    if store.dialect == "postgresql":
        for chunk in _chunks(wanted, 500):
            rows = store.query(
                "SELECT k.node, k.part, r.value FROM unnest(?::text[], ?::text[]) AS k(node, part)"
                " CROSS JOIN LATERAL (SELECT value, started_at FROM rates WHERE metric = ?"
                " AND node = k.node AND part = k.part AND started_at >= ? AND started_at < ?"
                " ORDER BY started_at DESC LIMIT ?) AS r ORDER BY r.started_at",
                [[node for node, _ in chunk], [part for _, part in chunk], metric, since, before, last],
            )
            for node, part, value in rows:
                found.setdefault((node, part), []).append(float(value))
        return found
    for node, part in wanted:
        rows = store.query(
            "SELECT value FROM rates WHERE metric = ? AND node = ? AND part = ? AND started_at >= ?"
            " AND started_at < ? ORDER BY started_at DESC LIMIT ?",
            [metric, node, part, since, before, last],
        )
        if rows:
            found[(node, part)] = [float(value) for (value,) in reversed(rows)]
    return found


def median(values: Sequence[float]) -> float:
    return float(statistics.median(values))


def earlier_failures(
    store: Store, keys: Sequence[str], parts: Sequence[str], since: str, before: str
) -> list[tuple[str, str, str | None, str, str]]:
    """(finding key, node, part, check, cause, started_at) of the failures and warnings with one of
    ``keys`` or about one of ``parts``, from ``since`` to before ``before``, oldest first."""
    found: list[tuple[str, str, str | None, str, str]] = []
    for column, values in (("finding_key", keys), ("part", parts)):
        for chunk in _chunks(sorted(set(values)), 500):
            marks = placeholders(chunk)
            rows = store.query(
                f"SELECT finding_key, node, part, check_name || '/' || cause, started_at FROM findings"
                f" WHERE started_at >= ? AND started_at < ? AND {column} IN ({marks}) ORDER BY started_at",
                [since, before, *chunk],
            )
            found.extend((str(k), str(n), p, str(c), str(s)) for k, n, p, c, s in rows)
    return sorted(set(found), key=lambda row: row[4])


@dataclass(frozen=True)
class KeptRun:
    """A run as ``preflight history --runs`` lists it. ``report``: where its JSON report was
    written (None: not written, or by a preflight before schema version 4)."""

    id: int
    started_at: str
    inventory: str
    profile: str
    verdict: str
    local: bool
    nodes_checked: int
    nodes_failed: int
    tool_version: str
    report: str | None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def runs_kept(store: Store, since: str, node: str = "") -> list[KeptRun]:
    """The runs since ``since``, newest first (those that reached ``node`` only, where given: a
    node's identity); each with the nodes it checked (reached) and the nodes a failure or an error
    named."""
    where, params = "r.started_at >= ?", [since]
    if node:
        where += " AND EXISTS (SELECT 1 FROM nodes m WHERE m.run_id = r.id AND m.node = ?)"
        params.append(node)
    rows = store.query(
        "SELECT r.id, r.started_at, r.inventory, r.profile, r.verdict, r.local,"
        " (SELECT COUNT(*) FROM nodes n WHERE n.run_id = r.id AND n.reachable = 1),"
        " (SELECT COUNT(DISTINCT f.node) FROM findings f WHERE f.run_id = r.id"
        f" AND f.status IN {FAILED} AND f.node <> '*'),"
        f" r.tool_version, r.report_path FROM runs r WHERE {where} ORDER BY r.started_at DESC, r.id DESC",
        params,
    )
    return [
        KeptRun(int(i), str(at), str(inv), str(prof), str(v), bool(loc), int(c), int(f), str(tv), rp)
        for i, at, inv, prof, v, loc, c, f, tv, rp in rows
    ]


def resolve_node(store: Store, name: str) -> str:
    """The identity of the node ``name`` names: an identity the store keeps, else the node the
    latest run that reached a node by that name found, else the node a name kept before identities
    was joined to; else ``name`` itself."""
    if not name or store.query("SELECT 1 FROM nodes WHERE node = ? LIMIT 1", (name,)):
        return name
    found = store.query("SELECT node FROM nodes WHERE reached_as = ? ORDER BY run_id DESC LIMIT 1", (name,))
    if not found:
        found = store.query("SELECT node FROM legacy_names WHERE name = ?", (name,))
    if not found and store.query("SELECT 1 FROM nodes WHERE node = ? LIMIT 1", (short_hostname(name),)):
        return short_hostname(name)
    return str(found[0][0]) if found else name


def legacy_names(store: Store) -> list[dict[str, str]]:
    """The names kept before node identities (schema version 4), each with the node it now belongs
    to and how (joined, or left as it is and why)."""
    rows = store.query("SELECT name, node, how FROM legacy_names ORDER BY name")
    return [{"name": str(n), "node": str(node), "how": str(how)} for n, node, how in rows]
