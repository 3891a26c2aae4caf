"""GPU facts from nvidia-smi, where NVML is not usable: its CSV queries, ``nvlink --status`` and the
link error counters (:mod:`preflight.node.smi_counters`), parsed into the same GPU facts as
:mod:`preflight.node.nvml` gives, errors ("[GPU is lost]") in the GPU's ``errors`` by fact.
"""

from __future__ import annotations

import contextlib
import re
from typing import TYPE_CHECKING, Any

from preflight.node.gathering import Unavailable, failed, run_command, run_output
from preflight.node.smi_counters import NVLINK_ERRORS_ARGS, PCIE_ARGS, add_link_errors

if TYPE_CHECKING:
    from collections.abc import Iterable, Mapping, Sequence

    JsonDict = dict[str, Any]

# nvidia-smi can be slow to start on nodes without the persistence daemon: it gets more time than
# other commands.
NVIDIA_SMI_TIMEOUT_S = 10.0

# nvidia-smi fallback queries (used when pynvml is missing or NVML cannot start).
SMI_GPU_FIELDS = (
    "index",
    "name",
    "uuid",
    "pci.bus_id",
    "memory.total",
    "memory.used",
    "memory.free",
    "ecc.mode.current",
    "ecc.errors.uncorrected.volatile.total",
    "ecc.errors.uncorrected.aggregate.total",
    "temperature.gpu",
    "power.draw",
)
# Asked in a second, best-effort query: one field a driver does not know makes nvidia-smi refuse
# the whole query ("Field ... is not a valid field to query", exit 2), and these are newer than
# the fields above (row remapping came with Ampere-era drivers). Refused together, each group
# is asked on its own. Merged into the GPUs by uuid.
SMI_HEALTH_GROUPS = (
    (
        "remapped_rows.correctable",
        "remapped_rows.uncorrectable",
        "remapped_rows.pending",
        "remapped_rows.failure",
    ),
    ("retired_pages.pending",),
    ("mig.mode.current",),
    ("pcie.link.gen.current", "pcie.link.gen.max", "pcie.link.width.current", "pcie.link.width.max"),
    ("persistence_mode", "serial"),
    # Renamed from clocks_throttle_reasons in driver 535; older drivers know only the old name.
    ("clocks_event_reasons.active",),
    ("clocks_throttle_reasons.active",),
    # The GPU's registration with the NVSwitch fabric (Hopper-era drivers; "N/A" where the GPU has
    # no such fabric or the driver does not probe it, as on A100 systems).
    ("fabric.state", "fabric.status"),
    # Settings that change a GPU's speed or what a job sees of it, each beside the GPU's own
    # default or the value it takes at the next reboot (the pending modes).
    ("enforced.power.limit", "power.default_limit"),
    (
        "clocks.applications.graphics",
        "clocks.applications.memory",
        "clocks.default_applications.graphics",
        "clocks.default_applications.memory",
    ),
    ("ecc.mode.pending",),
    ("mig.mode.pending",),
    ("compute_mode",),
    # The GPU's firmware: its VBIOS and InfoROM image versions, compared between like GPUs.
    ("vbios_version", "inforom.img"),
    # Readings compared between like GPUs: corrected ECC errors, the clock limits, the board's
    # largest power limit, the memory's temperature (HBM GPUs; newer drivers only).
    ("ecc.errors.corrected.volatile.total", "ecc.errors.corrected.aggregate.total"),
    ("clocks.max.sm", "clocks.max.memory"),
    ("power.max_limit",),
    ("temperature.memory",),
)
# nvidia-smi's compute modes (``--help-query-gpu``: "0: Default", "1: Exclusive_Thread",
# "2: Prohibited", "3: Exclusive_Process"), as NVML numbers them.
COMPUTE_MODES = {0: "default", 1: "exclusive_thread", 2: "prohibited", 3: "exclusive_process"}
# What nvidia-smi prints after "Driver/library version mismatch" on newer drivers: the version of
# the user-space library it loaded (the kernel module's is in /proc/driver/nvidia/version).
_NVML_LIBRARY_RE = re.compile(r"NVML library version:\s*(\d+(?:\.\d+)+)")

SMI_APP_FIELDS = ("gpu_uuid", "pid", "used_memory", "process_name")
# Free-text columns: a value with commas in it is folded back into these.
_SMI_TEXT_FIELDS = ("process_name", "name", "gpu_name")

MIB = 1024 * 1024


# A value this GPU or driver does not have: no error (Hopper-era drivers deprecate applications
# clocks). Any other bracketed phrase is an error, in nvmlErrorString's words.
SMI_SILENT = ("N/A", "Not Supported", "Requested functionality has been deprecated")
# A field's GPU fact where it is not the field itself; a prefix stands for a group of fields.
_SMI_KEYS = {
    "pci.bus_id": "pci_bus_id",
    "memory.total": "memory_total_bytes",
    "memory.used": "memory_used_bytes",
    "memory.free": "memory_free_bytes",
    "ecc.mode.current": "ecc_mode",
    "ecc.errors.uncorrected.volatile.total": "ecc_uncorrected_volatile",
    "ecc.errors.uncorrected.aggregate.total": "ecc_uncorrected_aggregate",
    "temperature.gpu": "temperature_c",
    "power.draw": "power_w",
    "retired_pages.pending": "retired_pages_pending",
    "mig.mode.current": "mig_mode",
    "clocks_event_reasons.active": "clock_event_reasons",
    "clocks_throttle_reasons.active": "clock_event_reasons",
    "enforced.power.limit": "power_limit_w",
    "power.default_limit": "power_default_limit_w",
    "ecc.mode.pending": "ecc_mode_pending",
    "mig.mode.pending": "mig_mode_pending",
    "inforom.img": "inforom_image",
    "remapped_rows.": "remapped_rows",
    "pcie.link.": "pcie_link",
    "fabric.": "fabric",
    "clocks.applications.": "clocks_applications_mhz",
    "clocks.default_applications.": "clocks_default_applications_mhz",
    "ecc.errors.corrected.volatile.total": "ecc_corrected_volatile",
    "ecc.errors.corrected.aggregate.total": "ecc_corrected_aggregate",
    "clocks.max.": "clocks_max_mhz",
    "power.max_limit": "power_max_limit_w",
    "temperature.memory": "memory_temperature_c",
}
_SMI_FIELDS = frozenset(SMI_GPU_FIELDS + tuple(f for group in SMI_HEALTH_GROUPS for f in group))
# A GPU nvidia-smi cannot open ("...: GPU is lost. Reboot the system to recover this GPU").
_HANDLE_RE = re.compile(r"Unable to determine the device handle for GPU ?([0-9A-Fa-f:.]+): (.+)")


def smi_fact_key(field: str) -> str | None:
    """The GPU fact of a field the probe asks for (``temperature.gpu`` -> ``temperature_c``)."""
    if field not in _SMI_FIELDS:
        return None
    for name, key in _SMI_KEYS.items():
        if field == name or (name.endswith(".") and field.startswith(name)):
            return key
    return field


def _header_name(column: str) -> str:
    return re.sub(r"\s*\[[^\]]*\]\s*$", "", column.strip())


def parse_smi_csv(text: str, fields: Sequence[str] | None = None) -> list[dict[str, str]]:
    """nvidia-smi ``--format=csv`` output as one dict per row, keyed by field name.

    With ``fields`` the text has no header (``noheader``); without, the first line is the
    header and its unit suffixes (``memory.total [MiB]``) are dropped. Values are the raw
    stripped strings. A free-text column (a process or GPU name) that itself contains
    commas is put back together.
    """
    lines = [line for line in text.splitlines() if line.strip()]
    if fields is None:
        if not lines:
            return []
        names = [_header_name(column) for column in lines[0].split(",")]
        lines = lines[1:]
    else:
        names = list(fields)
    rows: list[dict[str, str]] = []
    for line in lines:
        values = [value.strip() for value in line.split(",")]
        if len(values) > len(names):
            text_at = next((names.index(n) for n in _SMI_TEXT_FIELDS if n in names), None)
            if text_at is None:
                continue
            after = len(names) - text_at - 1
            end = len(values) - after
            values = [*values[:text_at], ", ".join(values[text_at:end]), *values[end:]]
        if len(values) != len(names):
            continue
        rows.append(dict(zip(names, values)))  # noqa: B905 - lengths checked above
    return rows


def smi_value(raw: str | None) -> str | None:
    """A raw nvidia-smi value, or None for "N/A", "[Not Supported]" and other [markers]."""
    if raw is None:
        return None
    value = raw.strip()
    if not value or value in ("N/A", "Not Supported") or (value[0] == "[" and value[-1] == "]"):
        return None
    return value


def smi_error(raw: str | None) -> str | None:
    """The words of an error ("[GPU is lost]" -> "GPU is lost"); None for a reading or a silent
    marker (:data:`SMI_SILENT`)."""
    value = (raw or "").strip()
    if len(value) < 3 or value[0] != "[" or value[-1] != "]":
        return None
    words = value[1:-1].strip()
    return None if words in SMI_SILENT else words


def smi_errors(row: Mapping[str, str]) -> dict[str, str]:
    """One ``--query-gpu`` row's errors by GPU fact (a fact's first)."""
    errors: dict[str, str] = {}
    for field, raw in row.items():
        key = smi_fact_key(field)
        words = smi_error(raw) if key else None
        if key and words:
            errors.setdefault(key, words)
    return errors


def smi_number(raw: str | None) -> float | None:
    """A numeric nvidia-smi value with any unit suffix ("81559 MiB", "69.85 W") dropped."""
    value = smi_value(raw)
    if value is None:
        return None
    match = re.match(r"^(-?\d+(?:\.\d+)?)(?:\s*[A-Za-z%]+)?$", value)
    return float(match.group(1)) if match else None


def _smi_int(raw: str | None) -> int | None:
    number = smi_number(raw)
    return None if number is None else int(number)


def _smi_mib(raw: str | None) -> int | None:
    number = smi_number(raw)
    return None if number is None else int(number * MIB)


def _smi_bool(raw: str | None) -> bool | None:
    value = smi_value(raw)
    if value is None:
        return None
    return value.lower() in ("yes", "true", "enabled", "1")


def _smi_hex(raw: str | None) -> int | None:
    """``0x0000000000000008`` -> 8; None for N/A or anything else."""
    value = smi_value(raw)
    try:
        return int(value, 16) if value else None
    except ValueError:
        return None


def _smi_lower(raw: str | None) -> str | None:
    """A word value ("Enabled", "Exclusive_Process") lowercased; None for N/A and markers."""
    value = smi_value(raw)
    return value.lower() if value else None


def _smi_watts(raw: str | None) -> float | None:
    number = smi_number(raw)
    return None if number is None else round(number, 2)


def _smi_clocks(graphics: str | None, memory: str | None) -> JsonDict | None:
    """Graphics and memory clocks in MHz; None where neither is reported (the applications clocks
    are "[Requested functionality has been deprecated]" on Hopper-era drivers)."""
    clocks = {"graphics": _smi_int(graphics), "memory": _smi_int(memory)}
    return clocks if any(v is not None for v in clocks.values()) else None


def gpu_settings_from_smi_row(row: Mapping[str, str]) -> JsonDict:
    """The settings of one ``--query-gpu`` row that change speed or capacity (the same keys as the
    NVML path): the enforced power limit and its default, the applications clocks and their
    defaults, the pending ECC and MIG modes and the compute mode."""
    return {
        "power_limit_w": _smi_watts(row.get("enforced.power.limit")),
        "power_default_limit_w": _smi_watts(row.get("power.default_limit")),
        "clocks_applications_mhz": _smi_clocks(
            row.get("clocks.applications.graphics"), row.get("clocks.applications.memory")
        ),
        "clocks_default_applications_mhz": _smi_clocks(
            row.get("clocks.default_applications.graphics"), row.get("clocks.default_applications.memory")
        ),
        "ecc_mode_pending": _smi_lower(row.get("ecc.mode.pending")),
        "mig_mode_pending": _smi_lower(row.get("mig.mode.pending")),
        "compute_mode": _smi_lower(row.get("compute_mode")),
    }


def gpu_readings_from_smi_row(row: Mapping[str, str]) -> JsonDict:
    """The readings of one ``--query-gpu`` row that are compared between like GPUs (the same keys as
    the NVML path): corrected ECC errors since the driver loaded and over the GPU's life, the SM and
    memory clock limits, the board's largest power limit and the memory's temperature."""
    clocks = {"sm": _smi_int(row.get("clocks.max.sm")), "memory": _smi_int(row.get("clocks.max.memory"))}
    return {
        "ecc_corrected_volatile": _smi_int(row.get("ecc.errors.corrected.volatile.total")),
        "ecc_corrected_aggregate": _smi_int(row.get("ecc.errors.corrected.aggregate.total")),
        "clocks_max_mhz": clocks if any(v is not None for v in clocks.values()) else None,
        "power_max_limit_w": _smi_watts(row.get("power.max_limit")),
        "memory_temperature_c": _smi_int(row.get("temperature.memory")),
    }


def nvml_library_version(text: str) -> str | None:
    """The user-space NVML library's version nvidia-smi names when it meets a kernel module of
    another version ("NVML library version: 570.124"); None where it does not say."""
    match = _NVML_LIBRARY_RE.search(text)
    return match.group(1) if match else None


def gpu_fabric(state: str | None, status: str | None) -> JsonDict | None:
    """A GPU's registration with the NVSwitch fabric: ``state`` (not_started, in_progress or
    completed) and ``status`` ("Success" or the error; it means something only once completed).
    None where the GPU does not report one."""
    if not state:
        return None
    return {"state": state.strip().lower().replace(" ", "_"), "status": status}


def gpu_from_smi_row(row: Mapping[str, str]) -> JsonDict:
    """One ``--query-gpu`` row as a GPU fact (the same keys as the NVML path)."""
    ecc_mode = smi_value(row.get("ecc.mode.current"))
    remapped: JsonDict | None = None
    if any(key.startswith("remapped_rows.") for key in row):
        remapped = {
            "correctable": _smi_int(row.get("remapped_rows.correctable")),
            "uncorrectable": _smi_int(row.get("remapped_rows.uncorrectable")),
            "pending": _smi_bool(row.get("remapped_rows.pending")),
            "failure": _smi_bool(row.get("remapped_rows.failure")),
        }
        if all(value is None for value in remapped.values()):
            remapped = None
    power = smi_number(row.get("power.draw"))
    mig = smi_value(row.get("mig.mode.current"))
    persistence = smi_value(row.get("persistence_mode"))
    reasons = smi_value(row.get("clocks_event_reasons.active") or row.get("clocks_throttle_reasons.active"))
    link = {
        "gen_current": _smi_int(row.get("pcie.link.gen.current")),
        "gen_max": _smi_int(row.get("pcie.link.gen.max")),
        "width_current": _smi_int(row.get("pcie.link.width.current")),
        "width_max": _smi_int(row.get("pcie.link.width.max")),
    }
    gpu: JsonDict = {
        "index": _smi_int(row.get("index")),
        "name": smi_value(row.get("name")),
        "uuid": smi_value(row.get("uuid")),
        "pci_bus_id": smi_value(row.get("pci.bus_id")),
        "memory_total_bytes": _smi_mib(row.get("memory.total")),
        "memory_used_bytes": _smi_mib(row.get("memory.used")),
        "memory_free_bytes": _smi_mib(row.get("memory.free")),
        "ecc_mode": ecc_mode.lower() if ecc_mode else None,
        "ecc_uncorrected_volatile": _smi_int(row.get("ecc.errors.uncorrected.volatile.total")),
        "ecc_uncorrected_aggregate": _smi_int(row.get("ecc.errors.uncorrected.aggregate.total")),
        "remapped_rows": remapped,
        "retired_pages_pending": _smi_bool(row.get("retired_pages.pending")),
        "mig_mode": mig.lower() if mig else None,
        "processes": [],
        "temperature_c": _smi_int(row.get("temperature.gpu")),
        "power_w": None if power is None else round(power, 2),
        "serial": smi_value(row.get("serial")),
        "pcie_link": link if any(v is not None for v in link.values()) else None,
        "fabric": gpu_fabric(smi_value(row.get("fabric.state")), smi_value(row.get("fabric.status"))),
        "nvlink": None,  # from nvidia-smi nvlink --status (nvlinks_from_smi)
        "link_errors": None,  # from nvidia-smi's own reports (smi_counters.add_link_errors)
        "persistence_mode": persistence.lower() if persistence else None,
        "clock_event_reasons": _smi_hex(reasons),
        "vbios_version": smi_value(row.get("vbios_version")),
        "inforom_image": smi_value(row.get("inforom.img")),
        "inforom_valid": None,  # NVML's validation only (nvmlDeviceValidateInforom)
        **gpu_settings_from_smi_row(row),
        **gpu_readings_from_smi_row(row),
    }
    errors = smi_errors(row)
    if errors:
        gpu["errors"] = errors
    return gpu


def processes_from_smi_rows(rows: Iterable[Mapping[str, str]]) -> dict[str, list[JsonDict]]:
    """``--query-compute-apps`` rows grouped by GPU UUID."""
    by_gpu: dict[str, list[JsonDict]] = {}
    for row in rows:
        uuid = smi_value(row.get("gpu_uuid"))
        pid = _smi_int(row.get("pid"))
        if uuid is None or pid is None:
            continue
        used = row.get("used_memory", row.get("used_gpu_memory"))
        by_gpu.setdefault(uuid, []).append(
            {
                "pid": pid,
                "used_memory_bytes": _smi_mib(used),
                "name": smi_value(row.get("process_name")),
            }
        )
    return by_gpu


def gpus_from_smi(
    gpu_text: str,
    apps_text: str | None,
    header: bool = False,
    health: Sequence[tuple[Sequence[str], str]] = (),
    lost: Sequence[tuple[str, str]] = (),
) -> list[JsonDict]:
    """GPU facts from the nvidia-smi queries (``noheader`` with our fields by default): the GPUs,
    their processes (None: the query failed, which is not "no process"), the health queries that
    answered, each a (fields after ``uuid``, output) pair, merged by uuid, and the GPUs it could
    not open (``lost``: bus id, words) on the GPU of that bus id, or the first whose bus id is an
    error, or one more. An index that is an error is the row's place (GPUs come in index order)."""
    gpu_rows = parse_smi_csv(gpu_text, None if header else SMI_GPU_FIELDS)
    for fields, text in health:
        by_uuid = {row.get("uuid"): row for row in parse_smi_csv(text, None if header else ["uuid", *fields])}
        for row in gpu_rows:
            extra = by_uuid.get(row.get("uuid")) if smi_value(row.get("uuid")) else None
            if extra is not None:
                row.update({k: v for k, v in extra.items() if k != "uuid"})
    gpus = [gpu_from_smi_row(row) for row in gpu_rows]
    for position, gpu in enumerate(gpus):
        if gpu["index"] is None and "index" in gpu.get("errors", {}):
            gpu["index"] = position
    if apps_text is not None:
        by_gpu = processes_from_smi_rows(parse_smi_csv(apps_text, None if header else SMI_APP_FIELDS))
        for gpu in gpus:
            gpu["processes"] = by_gpu.get(gpu["uuid"], [])
    for bus, words in lost:
        same = [g for g in gpus if (g["pci_bus_id"] or "").lower()[-12:] == bus.lower()[-12:]]
        unknown = [g for g in gpus if "pci_bus_id" in g.get("errors", {}) and "handle" not in g["errors"]]
        found = next(iter(same + unknown), None)
        if found is None:
            found = {"index": None, "pci_bus_id": None}
            gpus.append(found)
        found["pci_bus_id"] = found["pci_bus_id"] or bus
        found.setdefault("errors", {})["handle"] = words
    return gpus


_NVLINK_GPU_RE = re.compile(r"^GPU (\d+): ")
_NVLINK_LINK_RE = re.compile(r"^\s+Link (\d+): (.+?)\s*$")
_NVLINK_SPEED_RE = re.compile(r"^\d+(?:\.\d+)? GB/s$")
# What nvidia-smi prints under a GPU instead of its links when none is up ("... as all links are
# inActive"): NVLinks down, or an NVLink card without its bridge.
_NVLINK_ALL_DOWN_RE = re.compile(r"all links are inactive", re.IGNORECASE)


def nvlinks_from_smi(text: str) -> dict[int, JsonDict]:
    """``nvidia-smi nvlink -s`` by GPU index: how many links are up (a speed) and which are
    ``<inactive>``; ``all_inactive`` where the driver says all are, without listing them. A GPU
    that lists no link (no NVLink) has no entry."""
    found: dict[int, JsonDict] = {}
    current: JsonDict | None = None
    for line in text.splitlines():
        if gpu := _NVLINK_GPU_RE.match(line):
            current = found.setdefault(int(gpu.group(1)), {"active": 0, "inactive": []})
        elif current is not None and (link := _NVLINK_LINK_RE.match(line)):
            value = link.group(2)
            if value == "<inactive>":
                current["inactive"].append(int(link.group(1)))
            elif _NVLINK_SPEED_RE.match(value):
                current["active"] += 1
        elif current is not None and _NVLINK_ALL_DOWN_RE.search(line):
            current["all_inactive"] = True
    return {
        index: links
        for index, links in found.items()
        if links["active"] or links["inactive"] or links.get("all_inactive")
    }


def smi_gpus(smi: str) -> list[JsonDict]:
    """The GPUs as nvidia-smi ``smi`` reports them: the main and health queries, the processes (None
    where that query failed), the NVLink states and the link error counters."""
    gpu_text, lost = _ask(smi, SMI_GPU_FIELDS)
    try:
        apps_text: str | None = run_command(
            [
                smi,
                "--query-compute-apps=" + ",".join(SMI_APP_FIELDS),
                "--format=csv,noheader,nounits",
            ],
            NVIDIA_SMI_TIMEOUT_S,
        )
    except Unavailable:
        apps_text = None
    gpus = gpus_from_smi(gpu_text, apps_text, health=_smi_health(smi), lost=lost)
    if apps_text is None:
        for gpu in gpus:
            gpu["processes"] = None
    if gpus:
        try:
            links = nvlinks_from_smi(run_command([smi, "nvlink", "--status"], NVIDIA_SMI_TIMEOUT_S))
        except Unavailable:
            links = {}
        for gpu in gpus:
            gpu["nvlink"] = links.get(gpu["index"]) if isinstance(gpu["index"], int) else None
        # GPUs that list no NVLink are not asked for NVLink errors: they would print none.
        nvlink_errors = _report(smi, NVLINK_ERRORS_ARGS) if links else None
        add_link_errors(gpus, nvlink_errors, _report(smi, PCIE_ARGS))
    return gpus


def _report(smi: str, args: Sequence[str]) -> str | None:
    """The text of one of nvidia-smi's reports for every GPU, best effort: None where it fails."""
    try:
        return run_command([smi, *args], NVIDIA_SMI_TIMEOUT_S)
    except Unavailable:
        return None


def _ask(smi: str, fields: Sequence[str]) -> tuple[str, list[tuple[str, str]]]:
    """One ``--query-gpu`` of ``fields`` and the GPUs it could not open (bus id, words); an error
    exit for those is kept where the other GPUs' rows came."""
    argv = [smi, "--query-gpu=" + ",".join(fields), "--format=csv,noheader,nounits"]
    status, out, err = run_output(argv, NVIDIA_SMI_TIMEOUT_S)
    lost = [(m.group(1), m.group(2).strip()) for m in _HANDLE_RE.finditer(f"{out}\n{err}")]
    if status != 0 and not (lost and parse_smi_csv(out, fields)):
        raise failed(argv, status, out, err)
    return out, lost


def _smi_health(smi: str) -> list[tuple[Sequence[str], str]]:
    """The health fields this nvidia-smi knows: all groups in one query, else group by group."""

    def ask(fields: Sequence[str]) -> str:
        return _ask(smi, ["uuid", *fields])[0]

    every = [field for group in SMI_HEALTH_GROUPS for field in group]
    try:
        return [(every, ask(every))]
    except Unavailable:
        pass
    answered: list[tuple[Sequence[str], str]] = []
    for group in SMI_HEALTH_GROUPS:
        with contextlib.suppress(Unavailable):
            answered.append((group, ask(group)))
    return answered
