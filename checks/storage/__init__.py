"""``storage``: every data path (``--data``) and the checkpoint directory (``--checkpoint-dir``)
as each node sees it. A data path is the same content everywhere, on one shared filesystem or as
separate copies (the report says which); the checkpoint directory is writable with room for a
checkpoint on every node, and shared or not. Nothing is left behind on any node.

Observed in :mod:`checks.storage.probe` by the node script :mod:`checks.storage.node`, judged in
:mod:`checks.storage.judge`; :mod:`checks.storage.details` says what its findings carry.
"""

from __future__ import annotations

from checks.storage.explain import EXPLAINS
from checks.storage.judge import NAME, Sharing, StorageObservation, judge_storage, sharing
from checks.storage.present import PRESENTATION
from checks.storage.probe import OBSERVE
from checks.storage.settings import DURATION, SETTINGS, StorageSection
from preflight.check import Check, CheckContext, Probe
from preflight.model import CheckResult

__all__ = ["CHECK", "Sharing", "StorageObservation", "judge_storage", "sharing"]


def _run(ctx: CheckContext) -> list[CheckResult]:
    cfg = ctx.config.section(StorageSection)
    if not cfg.has_paths:
        return judge_storage(StorageObservation((), "", {}), cfg)
    if not ctx.live_sessions:
        return [CheckResult(NAME, "skip", "no reachable host to look at")]
    return judge_storage(ctx.probe(OBSERVE), cfg)


def _starts_early(ctx: CheckContext) -> tuple[Probe[StorageObservation], ...]:
    """The probe, when there are paths to look at and nodes to look on."""
    return (OBSERVE,) if ctx.config.section(StorageSection).has_paths and ctx.live_sessions else ()


CHECK = Check(
    name=NAME,
    title="data paths hold the same content on every node; the checkpoint directory is writable with room",
    run=_run,
    presentation=PRESENTATION,
    action="fix_config",
    settings=SETTINGS,
    duration=DURATION,
    starts_early=_starts_early,
    explains=EXPLAINS,
)
