"""What ``--local`` (a job's prolog) learns from the store: the node compared with its last full run.

The last full run is the latest run without ``--local`` that reached the node. Its GPUs are
compared slot by slot (a GPU missing, or another serial in the slot: swapped), its versions
(driver, CUDA, cuDNN, NCCL, torch, Python: those both runs report), its HCA ports (a port gone,
or at another rate). Each change is a warning under ``history``; a part that is new to the node
is a note. It reads two small sets of rows by the node's identity (:mod:`preflight.identity`: the
prolog and a full run that reached the node by another name find the same rows), on the store's
indexes, and needs no network beyond the store itself.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from preflight.history.annotate import CHECK
from preflight.history.record import Part, RunRecord, versions_of
from preflight.history.store import Store
from preflight.model import CheckResult

GPU_MISSING = "gpu_missing"
GPU_SWAPPED = "gpu_swapped"
VERSIONS_CHANGED = "versions_changed"
HCA_MISSING = "hca_missing"
HCA_RATE_CHANGED = "hca_rate_changed"
PARTS_ADDED = "parts_added"


@dataclass(frozen=True)
class LastFullRun:
    """The node as its last full run saw it."""

    run_id: int
    started_at: str
    versions: dict[str, str]
    parts: list[Part]


def last_full_run(store: Store, node: str, before: str) -> LastFullRun | None:
    """The latest run up to ``before`` (this run is not written yet: one that started in the same
    second counts), not ``--local``, that reached ``node``; None if none did."""
    found = store.query(
        "SELECT r.id, r.started_at, n.stack_versions FROM nodes n JOIN runs r ON r.id = n.run_id"
        " WHERE n.node = ? AND n.reachable = 1 AND r.local = 0 AND r.started_at <= ?"
        " ORDER BY r.started_at DESC, r.id DESC LIMIT 1",
        (node, before),
    )
    if not found:
        return None
    run_id, started_at, versions = found[0]
    rows = store.query(
        "SELECT p.kind, p.part, p.slot, p.uuid, p.pci, p.rate FROM nodes n"
        " JOIN set_parts p ON p.digest = n.parts_digest WHERE n.run_id = ? AND n.node = ?",
        (run_id, node),
    )
    parts = [Part(node, kind, part, slot, uuid, pci, rate) for kind, part, slot, uuid, pci, rate in rows]
    loaded = json.loads(versions) if versions else {}
    return LastFullRun(int(run_id), str(started_at), {str(k): str(v) for k, v in loaded.items()}, parts)


def compare_with_last_full_run(record: RunRecord, store: Store) -> list[CheckResult]:
    """For each reachable node of a ``--local`` run: what changed since its last full run."""
    found: list[CheckResult] = []
    for host in record.hosts:
        if not host.reachable:
            continue
        last = last_full_run(store, record.key(host.name), record.started_at)
        if last is None:
            continue
        now = record.parts.get(record.key(host.name), [])
        found.extend(_gpus(host.name, now, last))
        found.extend(_versions(host.name, versions_of(host), last))
        found.extend(_hcas(host.name, now, last))
        found.extend(_added(host.name, now, last))
    return found


def _since(last: LastFullRun) -> str:
    return f"since its last full run ({last.started_at})"


def _by_slot(parts: Sequence[Part], kind: str) -> dict[str, Part]:
    return {p.slot: p for p in parts if p.kind == kind}


def _base(last: LastFullRun, item: str, node: str) -> dict[str, object]:
    return {"item": item, "node": node, "last_full_run": last.started_at}


def _gpus(node: str, now: Sequence[Part], last: LastFullRun) -> list[CheckResult]:
    before, after = _by_slot(last.parts, "gpu"), _by_slot(now, "gpu")
    missing = [before[s] for s in sorted(before, key=_slot_order) if s not in after]
    swapped = [
        (before[s], after[s])
        for s in sorted(before, key=_slot_order)
        if s in after and after[s].part != before[s].part
    ]
    found = []
    if missing:
        what = ", ".join(f"GPU {p.slot} ({p.part})" for p in missing)
        details = {
            **_base(last, GPU_MISSING, node),
            "gpus": [{"slot": p.slot, "part": p.part} for p in missing],
        }
        found.append(CheckResult(CHECK, "warn", f"{node}: {what} missing {_since(last)}", (node,), details))
    if swapped:
        what = ", ".join(f"GPU {old.slot} is {new.part}, was {old.part}" for old, new in swapped)
        details = {
            **_base(last, GPU_SWAPPED, node),
            "gpus": [{"slot": old.slot, "was": old.part, "now": new.part} for old, new in swapped],
        }
        found.append(CheckResult(CHECK, "warn", f"{node}: {what} {_since(last)}", (node,), details))
    return found


def _slot_order(slot: str) -> tuple[int, str]:
    return (int(slot), "") if slot.isdigit() else (1 << 30, slot)


def _versions(node: str, now: Mapping[str, str], last: LastFullRun) -> list[CheckResult]:
    changed = {name: (last.versions[name], now[name]) for name in now if name in last.versions}
    changed = {name: pair for name, pair in changed.items() if pair[0] != pair[1]}
    if not changed:
        return []
    what = ", ".join(f"{name} {was} -> {new}" for name, (was, new) in sorted(changed.items()))
    details = {
        **_base(last, VERSIONS_CHANGED, node),
        "changed": {name: {"was": was, "now": new} for name, (was, new) in sorted(changed.items())},
    }
    return [CheckResult(CHECK, "warn", f"{node}: {what} {_since(last)}", (node,), details)]


def _match_hcas(
    node: str, now: Sequence[Part], last: LastFullRun
) -> tuple[list[tuple[Part, Part]], list[Part], list[Part]]:
    """The HCA ports of both runs paired by identity (node GUID and port), then, where one run
    knew no GUID for a port (its identity is ``node:device/port``), by device and port; the
    ports of the full run left unpaired, and this run's. ``node``: as the messages name it."""
    before = {p.part: p for p in last.parts if p.kind == "hca"}
    after = {p.part: p for p in now if p.kind == "hca"}
    pairs = [(before.pop(key), after.pop(key)) for key in sorted(set(before) & set(after))]
    slots = {p.slot: p for p in after.values()}
    for key, old in sorted(before.items()):
        new = slots.get(old.slot)
        if new is not None and (old.part.endswith(f":{old.slot}") or new.part.endswith(f":{new.slot}")):
            pairs.append((before.pop(key), after.pop(new.part)))
            del slots[old.slot]
    return pairs, sorted(before.values(), key=lambda p: p.slot), sorted(after.values(), key=lambda p: p.slot)


def _hcas(node: str, now: Sequence[Part], last: LastFullRun) -> list[CheckResult]:
    pairs, missing, _ = _match_hcas(node, now, last)
    rates = sorted(((old, new) for old, new in pairs if old.rate != new.rate), key=lambda pair: pair[1].slot)
    found = []
    if missing:
        what = ", ".join(f"{p.slot} ({p.part})" for p in missing)
        details = {
            **_base(last, HCA_MISSING, node),
            "hca_ports": [{"slot": p.slot, "part": p.part, "rate": p.rate} for p in missing],
        }
        found.append(
            CheckResult(CHECK, "warn", f"{node}: HCA port {what} missing {_since(last)}", (node,), details)
        )
    if rates:
        what = ", ".join(
            f"{new.slot} at {new.rate or 'no rate'}, was {old.rate or 'no rate'}" for old, new in rates
        )
        details = {
            **_base(last, HCA_RATE_CHANGED, node),
            "hca_ports": [
                {"slot": new.slot, "part": new.part, "was": old.rate, "now": new.rate} for old, new in rates
            ],
        }
        found.append(CheckResult(CHECK, "warn", f"{node}: HCA port {what} {_since(last)}", (node,), details))
    return found


def _added(node: str, now: Sequence[Part], last: LastFullRun) -> list[CheckResult]:
    """GPUs in slots the last full run had empty, and HCA ports it did not have: a note."""
    gpu_slots = {p.slot for p in last.parts if p.kind == "gpu"}
    added = [p for p in now if p.kind == "gpu" and p.slot not in gpu_slots] + _match_hcas(node, now, last)[2]
    if not added:
        return []
    what = ", ".join(f"{'GPU' if p.kind == 'gpu' else 'HCA port'} {p.slot} ({p.part})" for p in added)
    details = {
        **_base(last, PARTS_ADDED, node),
        "parts": [{"kind": p.kind, "slot": p.slot, "part": p.part} for p in added],
    }
    return [CheckResult.note(CHECK, f"{node}: {what} new {_since(last)}", (node,), details)]
