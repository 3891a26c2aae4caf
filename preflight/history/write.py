"""Writing a run into the store, and forgetting old runs."""

from __future__ import annotations

import json
from datetime import datetime

from preflight.history.record import RunRecord, versions_of
from preflight.history.settings import iso
from preflight.history.store import Store


def save(store: Store, record: RunRecord) -> int:
    """Write ``record`` in one transaction; its run id."""
    with store.transaction():
        run_id = store.insert_returning_id(
            "INSERT INTO runs (started_at, inventory, profile, verdict, tool_version, local, hosts)"
            " VALUES (?, ?, ?, ?, ?, ?, ?) RETURNING id",
            (
                record.started_at,
                record.info.inventory,
                record.info.profile,
                record.verdict,
                record.tool_version,
                int(record.info.local),
                len(record.hosts),
            ),
        )
        store.insert_many(
            "nodes",
            ("run_id", "node", "reachable", "stack_versions"),
            [
                (run_id, h.name, int(h.reachable), json.dumps(versions_of(h), sort_keys=True))
                for h in record.hosts
            ],
        )
        store.insert_many(
            "parts",
            ("run_id", "node", "kind", "part", "slot", "uuid", "pci", "rate"),
            [
                (run_id, p.node, p.kind, p.part, p.slot, p.uuid, p.pci, p.rate)
                for parts in record.parts.values()
                for p in parts
            ],
        )
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
        store.insert_many(
            "rates",
            ("run_id", "started_at", "metric", "node", "part", "value"),
            [(run_id, record.started_at, r.metric, r.node, r.part, r.value) for r in record.rates],
        )
    return run_id


def forget_before(store: Store, when: datetime) -> int:
    """Delete the runs that started before ``when`` with all they wrote; how many runs."""
    cutoff = iso(when)
    with store.transaction():
        found = store.query("SELECT COUNT(*) FROM runs WHERE started_at < ?", (cutoff,))
        for table in ("nodes", "parts", "findings", "rates"):
            store.execute(
                f"DELETE FROM {table} WHERE run_id IN (SELECT id FROM runs WHERE started_at < ?)", (cutoff,)
            )
        store.execute("DELETE FROM runs WHERE started_at < ?", (cutoff,))
    return int(found[0][0])
