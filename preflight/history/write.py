"""Writing a run into the store, and forgetting old runs.

A node's parts are written as a part set (see :mod:`.schema`, version 3): a run writes a node's
parts only when the store has no set of the same contents, and the node's row names its set.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from datetime import datetime

from preflight.history.record import Part, RunRecord, versions_of
from preflight.history.schema import placeholders
from preflight.history.settings import iso
from preflight.history.store import Store


def save(store: Store, record: RunRecord) -> int:
    """Write ``record`` in one transaction; its run id."""
    digests = {node: digest_of(node, parts) for node, parts in record.parts.items()}
    with store.transaction():
        _write_part_sets(store, digests, record.parts)
        run_id = _insert_run(store, record)
        _insert_nodes(store, record, run_id, digests)
        _insert_findings(store, record, run_id)
        store.insert_many(
            "rates",
            ("run_id", "started_at", "metric", "node", "part", "value"),
            [(run_id, record.started_at, r.metric, r.node, r.part, r.value) for r in record.rates],
        )
    return run_id


def _insert_run(store: Store, record: RunRecord) -> int:
    """Insert the run's own row; its id."""
    return store.insert_returning_id(
        "INSERT INTO runs (started_at, inventory, profile, verdict, tool_version, local, hosts,"
        " report_path) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
        (
            record.started_at,
            record.info.inventory,
            record.info.profile,
            record.verdict,
            record.tool_version,
            int(record.info.local),
            len(record.hosts),
            record.info.report or None,
        ),
    )


def _insert_nodes(store: Store, record: RunRecord, run_id: int, digests: Mapping[str, str]) -> None:
    """Insert a row for each host of the run: reachable or not, its versions, part set and identity."""
    store.insert_many(
        "nodes",
        (
            "run_id",
            "node",
            "reachable",
            "stack_versions",
            "parts_digest",
            "reached_as",
            "hostname",
            "identity_source",
        ),
        [
            (
                run_id,
                record.key(h.name),
                int(h.reachable),
                json.dumps(versions_of(h), sort_keys=True),
                digests.get(record.key(h.name)),
                h.name,
                h.node.hostname if h.reachable else None,
                record.identities[h.name].source if h.name in record.identities else None,
            )
            for h in record.hosts
        ],
    )


def _insert_findings(store: Store, record: RunRecord, run_id: int) -> None:
    """Insert a row for each of the run's findings."""
    store.insert_many(
        "findings",
        (
            "run_id",
            "started_at",
            "finding_key",
            "check_name",
            "entity",
            "cause",
            "status",
            "node",
            "part",
            "summary",
        ),
        [
            (
                run_id,
                record.started_at,
                f.key,
                f.check,
                f.entity,
                f.cause,
                f.status,
                f.node,
                f.part,
                f.summary,
            )
            for f in record.findings
        ],
    )


def digest_of(node: str, parts: Sequence[Part]) -> str:
    """The name of ``node``'s part set: a digest of the node's name and its parts, in any order."""
    rows = sorted(json.dumps([p.kind, p.part, p.slot, p.uuid, p.pci, p.rate]) for p in parts)
    return hashlib.sha256(json.dumps([node, rows]).encode()).hexdigest()[:32]


def _write_part_sets(store: Store, digests: Mapping[str, str], parts: Mapping[str, Sequence[Part]]) -> None:
    """Write the part sets of ``digests`` (node -> digest) that the store does not hold yet. Two
    runs writing the same new set at once both name it; the one that inserts it writes its parts
    (PostgreSQL's ON CONFLICT waits for the other's transaction; SQLite writes one run at a time)."""
    known: set[str] = set()
    wanted = sorted(set(digests.values()))
    for start in range(0, len(wanted), 500):
        chunk = wanted[start : start + 500]
        marks = placeholders(chunk)
        known.update(
            d for (d,) in store.query(f"SELECT digest FROM part_sets WHERE digest IN ({marks})", chunk)
        )
    rows = []
    for node, digest in sorted(digests.items()):
        if digest in known:
            continue
        known.add(digest)
        inserted = store.query(
            "INSERT INTO part_sets (digest, node) VALUES (?, ?)"
            " ON CONFLICT (digest) DO NOTHING RETURNING digest",
            (digest, node),
        )
        if inserted:
            rows += [(digest, p.kind, p.part, p.slot, p.uuid, p.pci, p.rate) for p in parts[node]]
    store.insert_many("set_parts", ("digest", "kind", "part", "slot", "uuid", "pci", "rate"), rows)


def forget_before(store: Store, when: datetime) -> int:
    """Delete the runs that started before ``when`` with all they wrote; how many runs."""
    cutoff = iso(when)
    with store.transaction():
        found = store.query("SELECT COUNT(*) FROM runs WHERE started_at < ?", (cutoff,))
        for table in ("nodes", "findings", "rates"):
            store.execute(
                f"DELETE FROM {table} WHERE run_id IN (SELECT id FROM runs WHERE started_at < ?)", (cutoff,)
            )
        store.execute("DELETE FROM runs WHERE started_at < ?", (cutoff,))
        # The part sets no run names any more. A run writing at the same time that found one of them
        # fails to name it (the foreign key) and is not in the history: a warning in its report.
        unnamed = (
            "SELECT digest FROM part_sets s"
            " WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.parts_digest = s.digest)"
        )
        store.execute(f"DELETE FROM set_parts WHERE digest IN ({unnamed})")
        store.execute(f"DELETE FROM part_sets WHERE digest IN ({unnamed})")
    return int(found[0][0])
