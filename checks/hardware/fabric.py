"""The NVSwitch fabric's part of the ``hardware`` judge: on a node with NVSwitches, the NVIDIA Fabric
Manager must run, at the driver's version, and every GPU must register with the fabric.

What the node said of its fabric manager (``preflight.node.fabric_manager``): its systemd unit's
state, its version (``nv-fabricmanager --version``, else its log) and the errors and warnings of its
log, each marked whether it came after the fabric manager last started. A process named
``nv-fabricmanage`` says it runs; where none was seen, the unit's state decides where systemd knows
the unit (a process list may hide other users' processes), and elsewhere (no systemd, an older
probe) it does not run.

One finding a node, for its first root cause: a fabric manager of another version than the driver
(``fabric_manager_version``: it refuses to start, or runs against a driver it was not built for),
else one not running (``fabric_manager``), else GPUs not registered with the fabric
(``gpu_fabric``), each with the state, the versions and the log's last error as evidence; else the
errors its log holds since it started (``fabric_manager_log``, a warning), or from before its last
start where the GPUs' registration is not known to have completed. The log's NVSwitch errors
("detected NVSwitch non-fatal error 12028") are the kernel log's SXIDs, judged there
(``checks.hardware.sxid``) where that log was read. Nodes without NVSwitches: nothing.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from checks.hardware.details import FabricFinding, FabricLogLine
from checks.hardware.reading_errors import gpu_label
from preflight.facts import GpuFacts, NodeFacts
from preflight.model import CheckResult

NAME = "hardware"
UNIT = "nvidia-fabricmanager"
# States in which the unit runs, or is on its way to (its start takes seconds to a minute).
RUNNING_STATES = ("active", "activating", "reloading")
ERROR_LEVELS = ("CRITICAL", "FATAL", "ERROR")
# The fabric manager's copy of an SXID the NVSwitch driver logs in the kernel log.
_SXID_COPY = re.compile(r"detected NVSwitch (?:non-)?fatal error \d+")


@dataclass(frozen=True)
class FabricManager:
    """What a node said of its fabric manager: how it is not running (None where it runs, or where
    nothing says), whether that is its systemd unit's state (``from_unit``), its version, and its
    log's error and warning lines."""

    stopped: str | None
    from_unit: bool
    version: str | None
    log_source: str | None = None
    lines: Sequence[FabricLogLine] = field(default_factory=tuple)


def _unit_state(unit: Mapping[str, Any]) -> str:
    """``nvidia-fabricmanager is failed (exit-code, status 1)``, ``... is inactive (dead)``."""
    active, sub, result = unit.get("active_state"), unit.get("sub_state"), unit.get("result")
    status = unit.get("exec_main_status")
    if result and result != "success":
        why = f"{result}, status {status}" if status else str(result)
    else:
        why = str(sub or "")
    return f"{UNIT} is {active}" + (f" ({why})" if why else "")


def _lines(found: Any) -> list[FabricLogLine]:
    lines: list[FabricLogLine] = []
    for line in found if isinstance(found, list) else []:
        if isinstance(line, Mapping) and isinstance(line.get("line"), str):
            lines.append(
                {
                    "level": str(line.get("level")),
                    "line": line["line"],
                    "since_start": line.get("since_start") is True,
                }
            )
    return lines


def _map(found: Any) -> Mapping[str, Any]:
    return found if isinstance(found, Mapping) else {}


def fabric_manager(node: NodeFacts) -> FabricManager:
    """The node's fabric manager as its facts say: running where a process of its name was seen (the
    unit may be another's: a fabric manager run in the driver's container); else as its unit says
    where systemd knows it (a process list may hide other users' processes); else not running where
    no process of its name was seen (an older probe, no systemd)."""
    fm = _map(node.hardware.get("fabric_manager"))
    unit, log = _map(fm.get("unit")), _map(fm.get("log"))
    version = fm.get("version") if isinstance(fm.get("version"), str) else None
    source = log.get("source") if isinstance(log.get("source"), str) else None
    lines = _lines(log.get("lines"))
    running = node.hardware.get("fabric_manager_running")
    if running is not True and unit.get("load_state") == "loaded":
        stopped = None if unit.get("active_state") in RUNNING_STATES else _unit_state(unit)
        return FabricManager(stopped, True, version, source, lines)
    return FabricManager("not running" if running is False else None, False, version, source, lines)


def _own_errors(node: NodeFacts, lines: Sequence[FabricLogLine]) -> list[FabricLogLine]:
    """The log's error lines, less the SXIDs the node's kernel log holds where it was read."""
    xid = node.hardware.get("xid")
    read = isinstance(xid, Mapping) and xid.get("readable") is True
    return [
        line for line in lines
        if line["level"] in ERROR_LEVELS and not (read and _SXID_COPY.search(line["line"]))
    ]  # fmt: skip


def _gpus_text(gpus: Sequence[GpuFacts], of: int) -> str:
    if len(gpus) == of and of > 1:
        return f"all {of} GPUs"
    return ", ".join(gpu_label(g) for g in gpus)


def _log_error(errors: Sequence[FabricLogLine], whose: str = "its") -> str:
    """For a summary, the first error line since the fabric manager last started (where it stopped,
    the cause; what follows is its consequences), else the last one before."""
    since = [e for e in errors if e["since_start"]]
    if since:
        return f'; first error in {whose} log since it started: "{since[0]["line"]}"'
    return f'; last error in {whose} log: "{errors[-1]["line"]}"' if errors else ""


def _finding(
    item: str, host: str, gpus: Sequence[GpuFacts], fm: FabricManager, node: NodeFacts
) -> FabricFinding:
    details: FabricFinding = {"item": item, "node": host, "gpus": [g.index for g in gpus]}
    if fm.stopped and fm.from_unit:
        details["unit_state"] = fm.stopped
    if fm.version:
        details["version"] = fm.version
    if node.driver_version:
        details["driver_version"] = node.driver_version
    if fm.lines:
        details["log"] = list(fm.lines)
    if fm.log_source:
        details["log_source"] = fm.log_source
    return details


def _service_finding(
    host: str, node: NodeFacts, fm: FabricManager, waiting: list[GpuFacts], failed: list[GpuFacts]
) -> CheckResult | None:
    """The fabric manager of another version than the driver, or not running; None where neither.
    The details name the GPUs not registered, or registered with an error."""
    gpus = node.gpus or []
    errors = _own_errors(node, fm.lines)
    registration = f"; {_gpus_text(waiting, len(gpus))} not registered with the fabric" if waiting else ""
    driver = node.driver_version
    if fm.version and driver and fm.version != driver:
        state = f"; {fm.stopped}" if fm.stopped and fm.from_unit else ""
        summary = (
            f"{host}: fabric manager {fm.version} with driver {driver}: the fabric manager runs only with "
            f"the driver of its own version{state}{_log_error(errors)}{registration}"
        )
        details = _finding("fabric_manager_version", host, waiting + failed, fm, node)
        return CheckResult(NAME, "fail", summary, (host,), details)
    if fm.stopped is None:
        return None
    switches = node.hardware.get("nvswitches")
    state = f": {fm.stopped}" if fm.from_unit else ""
    name = "" if fm.from_unit else " (nv-fabricmanager)"
    summary = (
        f"{host}: {switches} NVSwitches but the fabric manager{name} is not running{state}"
        f"{_log_error(errors)}{registration}"
    )
    return CheckResult(
        NAME, "fail", summary, (host,), _finding("fabric_manager", host, waiting + failed, fm, node)
    )


def _log_finding(host: str, node: NodeFacts, fm: FabricManager) -> CheckResult | None:
    """Errors in the log of a running fabric manager since it started, or from before its last
    start where the GPUs' registration is not known to have completed; None where there are none."""
    errors = _own_errors(node, fm.lines)
    gpus = node.gpus or []
    registered = bool(gpus) and all(g.fabric_state == "completed" for g in gpus)
    since = [e for e in errors if e["since_start"]]
    shown = since or ([] if registered else errors)
    if not shown:
        return None
    when = (
        "since it last started" if since else "before it last started, and its GPUs' registration is unknown"
    )
    count = f"{len(shown)} error{'s' if len(shown) != 1 else ''}"
    summary = f'{host}: {count} in the fabric manager\'s log {when}; last: "{shown[-1]["line"]}"'
    return CheckResult(NAME, "warn", summary, (host,), _finding("fabric_manager_log", host, [], fm, node))


def _registration_finding(
    host: str, node: NodeFacts, fm: FabricManager, waiting: list[GpuFacts], failed: list[GpuFacts]
) -> CheckResult:
    gpus = node.gpus or []
    last = _log_error(_own_errors(node, fm.lines), "the fabric manager's")
    if waiting:
        states = sorted({str(g.fabric_state).replace("_", " ") for g in waiting})
        summary = (
            f"{host}: {_gpus_text(waiting, len(gpus))} not registered with the NVSwitch fabric "
            f"(registration {' or '.join(states)}): CUDA cannot start on them"
        )
    else:
        errors = sorted({str(g.fabric_status) for g in failed})
        summary = (
            f"{host}: {_gpus_text(failed, len(gpus))} completed fabric registration with an error "
            f"({'; '.join(errors)}), where the other {failed[0].name} GPUs succeeded"
        )
    summary += last
    return CheckResult(
        NAME, "fail", summary, (host,), _finding("gpu_fabric", host, waiting + failed, fm, node)
    )


def judge_fabric(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """NVSwitch nodes: the fabric manager at the driver's version and running, every GPU registered
    with the fabric, the fabric manager's log without errors; one finding a node. A registration that
    completed with an error counts only where GPUs of the same model elsewhere in the run completed
    without one (some systems report an error there and run)."""
    registered_models = {
        gpu.name
        for node in nodes.values()
        for gpu in node.gpus or []
        if gpu.fabric_state == "completed" and gpu.fabric_status == "Success"
    }
    results: list[CheckResult] = []
    for host, node in nodes.items():
        gpus = node.gpus or []
        waiting = [g for g in gpus if g.unregistered]
        failed = [
            g for g in gpus
            if g.fabric_state == "completed" and g.fabric_status not in (None, "Success")
            and g.name in registered_models
        ]  # fmt: skip
        switches = node.hardware.get("nvswitches")
        fm = fabric_manager(node)
        found = None
        if isinstance(switches, int) and switches > 0:
            found = _service_finding(host, node, fm, waiting, failed)
        if found is None and (waiting or failed):
            found = _registration_finding(host, node, fm, waiting, failed)
        if found is None and isinstance(switches, int) and switches > 0:
            found = _log_finding(host, node, fm)
        if found is not None:
            results.append(found)
    return results
