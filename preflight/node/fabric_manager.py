"""The NVIDIA Fabric Manager of a node with NVSwitches, read without root: its systemd unit's state,
its version, and the errors and warnings of its log (the file its configuration names, else the
unit's journal), each marked whether it came after the fabric manager last started.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any

from preflight.node.gathering import Unavailable, find_tool, read_text, run_command

if TYPE_CHECKING:
    JsonDict = dict[str, Any]

UNIT = "nvidia-fabricmanager"
CONFIG = "/usr/share/nvidia/nvswitch/fabricmanager.cfg"
DEFAULT_LOG = "/var/log/fabricmanager.log"
# systemctl show's properties, as the facts name them.
UNIT_PROPERTIES = {
    "LoadState": "load_state",
    "ActiveState": "active_state",
    "SubState": "sub_state",
    "Result": "result",
    "ExecMainStatus": "exec_main_status",
}
# The log's end only: the file grows to its LOG_FILE_MAX_SIZE (1 GiB by default) across restarts.
LOG_TAIL_BYTES = 256 * 1024
KEPT_LINES = 20
TROUBLE_LEVELS = ("CRITICAL", "FATAL", "ERROR", "WARNING", "WARN")

# "Fabric Manager version is : 610.57.04" (newer versions add a "Build Info - Branch: ..." line).
_VERSION = re.compile(r"Fabric Manager version is\s*:\s*(\S+)")
# A log file line, "[Feb 27 2025 15:10:02] [ERROR] [tid 12727] detected NVSwitch ...", also inside
# a journal line where the fabric manager logs to its standard error.
_LEVEL = re.compile(r"\[([A-Z]+)\] (?:\[tid \d+\] )?\S")
# A start: the log file's "Fabric Manager version X is running with the following configuration
# options", or systemd's "Starting nvidia-fabricmanager.service - NVIDIA fabric manager service...".
_START = re.compile(
    r"Fabric Manager version (\S+) is running|Starting (?:NVIDIA fabric manager|nvidia-fabricmanager)"
)
# The version check that stops it: "fabric manager NVIDIA GPU driver interface version 530.30.02
# don't match with driver version 530.41.03".
_MISMATCH = re.compile(r"driver interface version (\S+) do(?:n't|esn't) match")
# A journal line without a level ("nv-fabricmanager[4177]: ...", "systemd[1]: ...") that says
# something failed.
_FAILURE = re.compile(r"fail|error|don't match|doesn't match|invalid|abort", re.IGNORECASE)


def parse_version(text: str) -> str | None:
    """The version ``nv-fabricmanager --version`` prints."""
    found = _VERSION.search(text)
    return found.group(1) if found else None


def parse_unit(text: str) -> JsonDict:
    """``systemctl show --property=...``'s ``Name=value`` lines, by the facts' names."""
    unit: JsonDict = {}
    for line in text.splitlines():
        name, _, value = line.partition("=")
        if name.strip() in UNIT_PROPERTIES:
            value = value.strip()
            unit[UNIT_PROPERTIES[name.strip()]] = int(value) if value.isdigit() else value
    return unit


def log_file(config_text: str | None) -> str | None:
    """The log file the configuration names (LOG_FILE_NAME); None where it names none (the fabric
    manager then logs to its standard error, the unit's journal)."""
    for line in (config_text or "").splitlines():
        name, _, value = line.partition("=")
        if name.strip() == "LOG_FILE_NAME":
            return value.strip() or None
    return DEFAULT_LOG


def _level(line: str) -> str | None:
    found = _LEVEL.search(line)
    if found:
        return found.group(1) if found.group(1) in TROUBLE_LEVELS else None
    _, said, message = line.partition("]: ")
    return "ERROR" if said and _FAILURE.search(message) else None


def parse_log(text: str) -> JsonDict:
    """A fabric manager log's last start line (None where the text holds none), the version it or a
    failed version check after it names, and its last ``KEPT_LINES`` error and warning lines, each with its
    level (a journal line that says a failure: ``ERROR``) and whether it came after that start."""
    troubles: list[JsonDict] = []
    started, version, after = None, None, 0
    for raw in text.splitlines():
        line = raw.strip()[:300]
        start, mismatch = _START.search(line), _MISMATCH.search(line)
        if start:
            started, after = line, len(troubles)
            version = start.group(1)
            continue
        version = mismatch.group(1) if mismatch else version
        level = _level(line)
        if level:
            troubles.append({"level": level, "line": line})
    for n, trouble in enumerate(troubles):
        trouble["since_start"] = n >= after
    return {"started": started, "version": version, "lines": troubles[-KEPT_LINES:]}


def _tail(path: str) -> str:
    try:
        with open(path, "rb") as handle:
            handle.seek(max(0, handle.seek(0, 2) - LOG_TAIL_BYTES))
            return handle.read().decode("utf-8", "replace")
    except OSError as exc:
        raise Unavailable(f"{path}: {exc.strerror}") from None


def _log() -> JsonDict:
    """The log file's end, else the unit's journal of this boot; why neither could be read."""
    path = log_file(read_text(CONFIG))
    reasons = []
    if path:
        try:
            return {"source": path, **parse_log(_tail(path))}
        except Unavailable as exc:
            reasons.append(str(exc))
    journalctl = find_tool("journalctl")
    argv = [journalctl or "journalctl", "-u", UNIT, "-b", "-q", "--no-pager", "-n", "400"]
    try:
        text = run_command(argv) if journalctl else ""
    except Unavailable as exc:
        text = ""
        reasons.append(str(exc))
    if text.strip():
        return {"source": "journalctl", **parse_log(text)}
    reasons.append("the unit's journal is empty or not readable")
    return {"source": path or "journalctl", "readable": False, "reason": "; ".join(reasons)[:300]}


def _run(tool: str, *args: str) -> tuple[str | None, str | None]:
    """A command's output, or None and why it gave none."""
    path = find_tool(tool)
    if path is None:
        return None, tool + " not found"
    try:
        return run_command([path, *args]), None
    except Unavailable as exc:
        return None, str(exc)[:200]


def fabric_manager_facts() -> JsonDict:
    """The unit's state (or why systemctl could not say), the fabric manager's version (from its
    binary, else from its log) and its log's errors and warnings."""
    shown, why = _run("systemctl", "show", "--property=" + ",".join(UNIT_PROPERTIES), UNIT + ".service")
    unit = parse_unit(shown) if shown is not None else {"readable": False, "reason": why}
    printed, _ = _run("nv-fabricmanager", "--version")
    log = _log()
    version = parse_version(printed or "")
    facts: JsonDict = {"unit": unit, "version": version or log.get("version"), "log": log}
    facts["version_source"] = "nv-fabricmanager" if version else ("log" if facts["version"] else None)
    return facts
