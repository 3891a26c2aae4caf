"""A run's use of the store, as the runner calls it once at the end: read what failed before,
compare a ``--local`` run's node with its last full run, write this run, forget runs past
``keep``, and give the report what the store says about the run's nodes (its ``history`` key).
Any failure of the store is a warning in the report; the verdict and the findings of the checks
stay as they were."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import UTC, datetime

from preflight.history.annotate import CHECK, slower_than_own_past, with_repeats
from preflight.history.joins import adopt_legacy_names
from preflight.history.local import compare_with_last_full_run
from preflight.history.record import RunInfo, RunRecord, record_of
from preflight.history.report_section import run_history
from preflight.history.settings import HistorySection, parse_keep, store_target
from preflight.history.store import HistoryError, Store, open_store
from preflight.history.write import forget_before, save
from preflight.identity import INVENTORY, Identity
from preflight.model import CheckResult, RunReport

IDENTITY_CLASH = "identity_clash"


@dataclass(frozen=True)
class HistoryRequest:
    section: HistorySection
    info: RunInfo


def remember(report: RunReport, request: HistoryRequest) -> RunReport:
    """``report`` with what the store knows added, after writing it to the store."""
    if not request.section.enabled or report.interrupted:
        return report
    target = store_target(request.section)
    try:
        store = open_store(target)
    except HistoryError as exc:
        return _with_warning(report, exc)
    try:
        return _remember(report, request, store)
    except HistoryError as exc:
        return _with_warning(report, exc)
    finally:
        store.close()


def _remember(report: RunReport, request: HistoryRequest, store: Store) -> RunReport:
    section = request.section
    record = record_of(report, request.info)
    record = record_of(report, request.info, _known_identities(store, record))
    adopt_legacy_names(store, record.keys)
    results = with_repeats(report.results, record, store, section.window_days)
    results += [
        CheckResult(
            CHECK, "warn", c.summary, c.names, {"item": IDENTITY_CLASH, "identity": c.key, "source": c.source}
        )
        for c in record.clashes
    ]
    results += slower_than_own_past(record, store, section.window_days, section.slower_margin)
    if request.info.local:
        results += compare_with_last_full_run(record, store)
    save(store, record)
    if section.keep:
        forget_before(store, datetime.now(UTC) - parse_keep(section.keep))
    report = dataclasses.replace(report, results=tuple(results))
    try:
        return dataclasses.replace(report, history=run_history(store, record, section.window_days, results))
    except HistoryError as exc:  # the run is written; only the report's section is missing
        return _with_warning(report, exc, "the report has no history section")


def _known_identities(store: Store, record: RunRecord) -> dict[str, Identity]:
    """The nodes this run knows only by the name that reached them (not reached, so no facts):
    the identity the latest run that reached them by that name found, where no other node of this
    run has it."""
    taken = {i.key for i in record.identities.values() if i.source != INVENTORY}
    known: dict[str, Identity] = {}
    for name, identity in record.identities.items():
        if identity.source != INVENTORY or any(name in c.names for c in record.clashes):
            continue
        found = store.query(
            "SELECT node, identity_source FROM nodes WHERE reached_as = ? AND identity_source <> ?"
            " ORDER BY run_id DESC LIMIT 1",
            (name, INVENTORY),
        )
        if found and found[0][0] not in taken:
            known[name] = Identity(str(found[0][0]), str(found[0][1]), name)
            taken.add(str(found[0][0]))
    return known


def _with_warning(
    report: RunReport, error: HistoryError, said: str = "this run is not in the history"
) -> RunReport:
    warning = CheckResult(CHECK, "warn", f"{error} ({said})", (), {"item": "store"})
    return dataclasses.replace(report, results=(*report.results, warning))
