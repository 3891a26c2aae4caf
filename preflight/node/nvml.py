"""GPU facts through NVML (pynvml, where the node has it): the driver, every GPU's identity, memory,
ECC and row remapping, processes, PCIe and NVLink links, NVSwitch fabric registration, the
settings that change its speed or capacity, and its firmware (VBIOS, InfoROM).
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import TYPE_CHECKING, Any

from preflight.node.gathering import Unavailable, read_text
from preflight.node.shared import decode_cuda_version, text_of
from preflight.node.smi import COMPUTE_MODES, gpu_fabric

if TYPE_CHECKING:
    from collections.abc import Callable

    JsonDict = dict[str, Any]

# nvmlGpuFabricState_t (nvml.h): NOT_SUPPORTED is left out, as nvidia-smi's "Not Supported" is.
NVML_FABRIC_STATES = {1: "not_started", 2: "in_progress", 3: "completed"}


def _nvml_error_types(nv: Any) -> tuple[type[BaseException], type[BaseException] | None]:
    base = getattr(nv, "NVMLError", Exception)
    not_supported = getattr(nv, "NVMLError_NotSupported", None)
    return base, not_supported


def _nvml_call(nv: Any, problems: dict[str, str], label: str, fname: str, *args: Any) -> Any:
    """Call ``nv.<fname>(*args)``: NotSupported gives None; other errors are noted in problems."""
    base, not_supported = _nvml_error_types(nv)
    func = getattr(nv, fname, None)
    if func is None:
        problems[label] = f"NVML: {fname} not in this pynvml"
        return None
    try:
        return func(*args)
    except base as exc:
        if not_supported is not None and isinstance(exc, not_supported):
            return None
        problems[label] = f"NVML: {exc}"
        return None


def _nvml_memory(nv: Any, handle: Any, problems: dict[str, str], label: str) -> Any:
    """The GPU's memory: ``nvmlDeviceGetMemoryInfo`` version 2 where pynvml (11.510 and later) and
    the driver have it, version 1 otherwise. Version 1 counts the memory the driver reserves for
    itself as used (480 MiB of an idle H100 80GB on driver 580); version 2 says it apart, and its
    ``used`` is nvidia-smi's "Used", so both paths to the facts agree. ``free`` is the same in both."""
    version = getattr(nv, "nvmlMemory_v2", None)
    if version is not None:
        base, _ = _nvml_error_types(nv)
        try:
            return nv.nvmlDeviceGetMemoryInfo(handle, version=version)
        except (base, TypeError):  # a driver without the v2 call, a pynvml without the argument
            pass
    return _nvml_call(nv, problems, label, "nvmlDeviceGetMemoryInfo", handle)


def _process_name(nv: Any, pid: int) -> str | None:
    try:
        name = text_of(nv.nvmlSystemGetProcessName(pid)).strip()
    except Exception:
        name = ""
    if not name:
        name = (read_text(f"/proc/{pid}/comm") or "").strip()
    return name or None


def _nvml_process(nv: Any, proc: Any) -> JsonDict:
    pid = int(proc.pid)
    used = getattr(proc, "usedGpuMemory", None)
    return {
        "pid": pid,
        "used_memory_bytes": int(used) if used is not None else None,
        "name": _process_name(nv, pid),
    }


def _mode(value: Any) -> str | None:
    """NVML_FEATURE_ENABLED (1) or DISABLED (0) as "enabled" / "disabled"."""
    return None if value is None else ("enabled" if int(value) == 1 else "disabled")


def _nvml_clocks(nv: Any, handle: Any, fname: str) -> JsonDict | None:
    """Graphics and memory clocks (MHz) from ``fname`` (the applications clocks or their defaults);
    None where the GPU reports neither (Hopper-era drivers deprecate applications clocks)."""
    clocks = {
        key: _nvml_call(nv, {}, "", fname, handle, getattr(nv, constant, number))
        for key, constant, number in (("graphics", "NVML_CLOCK_GRAPHICS", 0), ("memory", "NVML_CLOCK_MEM", 2))
    }
    found = {key: int(value) if value is not None else None for key, value in clocks.items()}
    return found if any(v is not None for v in found.values()) else None


def _nvml_settings(nv: Any, handle: Any, ecc: Any, mig: Any) -> JsonDict:
    """The settings that change speed or capacity, as :func:`gpu_settings_from_smi_row` gives
    them; best effort, without a problem noted. ``ecc`` and ``mig`` are NVML's (current, pending)
    pairs, already read."""
    enforced = _nvml_call(nv, {}, "", "nvmlDeviceGetEnforcedPowerLimit", handle)
    default = _nvml_call(nv, {}, "", "nvmlDeviceGetPowerManagementDefaultLimit", handle)
    compute = _nvml_call(nv, {}, "", "nvmlDeviceGetComputeMode", handle)
    return {
        "power_limit_w": round(enforced / 1000.0, 2) if enforced is not None else None,
        "power_default_limit_w": round(default / 1000.0, 2) if default is not None else None,
        "clocks_applications_mhz": _nvml_clocks(nv, handle, "nvmlDeviceGetApplicationsClock"),
        "clocks_default_applications_mhz": _nvml_clocks(nv, handle, "nvmlDeviceGetDefaultApplicationsClock"),
        "ecc_mode_pending": None if ecc is None else _mode(ecc[1]),
        "mig_mode_pending": None if mig is None else _mode(mig[1]),
        "compute_mode": None if compute is None else COMPUTE_MODES.get(int(compute)),
    }


def _inforom_valid(nv: Any, handle: Any) -> bool | None:
    """``nvmlDeviceValidateInforom``: True where the InfoROM checksums are valid, False where NVML
    says it is corrupted (NVML_ERROR_CORRUPTED_INFOROM, nvidia-smi's exit status 14), None where
    the GPU, driver or pynvml cannot say."""
    validate = getattr(nv, "nvmlDeviceValidateInforom", None)
    if validate is None:
        return None
    base, _ = _nvml_error_types(nv)
    try:
        validate(handle)
    except base as exc:
        corrupted = getattr(nv, "NVML_ERROR_CORRUPTED_INFOROM", 14)
        return False if getattr(exc, "value", None) == corrupted else None
    return True


def _nvml_firmware(nv: Any, handle: Any) -> JsonDict:
    """The GPU's firmware: its VBIOS version, its InfoROM image version and whether the InfoROM
    is valid; best effort, without a problem noted (None where NVML cannot say)."""
    vbios = _nvml_call(nv, {}, "", "nvmlDeviceGetVbiosVersion", handle)
    image = _nvml_call(nv, {}, "", "nvmlDeviceGetInforomImageVersion", handle)
    return {
        "vbios_version": (text_of(vbios).strip() or None) if vbios is not None else None,
        "inforom_image": (text_of(image).strip() or None) if image is not None else None,
        "inforom_valid": _inforom_valid(nv, handle),
    }


# Error counters read in one nvmlDeviceGetFieldValues call: the GPU's PCIe replays and its NVLinks'
# errors summed over its links (NVML_FI_DEV_*; the numbers are nvml.h's, for a pynvml that lacks
# the names). Counted since the driver loaded.
LINK_ERROR_FIELDS = (
    ("pcie_replays", "NVML_FI_DEV_PCIE_REPLAY_COUNTER", 94),
    ("nvlink_crc_flit", "NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 38),
    ("nvlink_crc_data", "NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", 45),
    ("nvlink_replay", "NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", 52),
    ("nvlink_recovery", "NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", 59),
)
# nvmlValueType_t -> the member of nvmlValue_t that holds it.
_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def _nvml_link_errors(nv: Any, handle: Any) -> JsonDict | None:
    """The GPU's PCIe replay count and NVLink error counts (:data:`LINK_ERROR_FIELDS`), each None
    where the GPU does not count it (a GPU without NVLink, a field retired on newer GPUs); None
    where NVML cannot read field values at all."""
    read = getattr(nv, "nvmlDeviceGetFieldValues", None)
    if read is None:
        return None
    ids = [int(getattr(nv, name, number)) for _, name, number in LINK_ERROR_FIELDS]
    base, _ = _nvml_error_types(nv)
    try:
        values = read(handle, ids)
    except base:
        return None
    counts: JsonDict = {}
    for index, (key, _, _) in enumerate(LINK_ERROR_FIELDS):
        value = values[index]
        member = _VALUE_MEMBERS.get(int(getattr(value, "valueType", -1)))
        ok = int(getattr(value, "nvmlReturn", -1)) == 0 and member is not None
        counts[key] = int(getattr(value.value, member)) if ok and member else None
    return counts


def _nvml_memory_errors(nv: Any, handle: Any, call: Callable[..., Any]) -> JsonDict:
    """The GPU memory's uncorrected ECC errors (volatile and aggregate), its remapped rows and,
    before Ampere, whether a page retirement is pending (``call``: the GPU's reader that notes a
    problem under the field's name)."""
    uncorrected = getattr(nv, "NVML_MEMORY_ERROR_TYPE_UNCORRECTED", 1)
    volatile = call(
        "ecc_uncorrected_volatile",
        "nvmlDeviceGetTotalEccErrors",
        uncorrected,
        getattr(nv, "NVML_VOLATILE_ECC", 0),
    )
    aggregate = call(
        "ecc_uncorrected_aggregate",
        "nvmlDeviceGetTotalEccErrors",
        uncorrected,
        getattr(nv, "NVML_AGGREGATE_ECC", 1),
    )
    remapped = call("remapped_rows", "nvmlDeviceGetRemappedRows")
    # Page retirement is the pre-Ampere mechanism; Ampere and later remap rows instead.
    arch = _nvml_call(nv, {}, "", "nvmlDeviceGetArchitecture", handle)
    ampere = getattr(nv, "NVML_DEVICE_ARCH_AMPERE", 7)
    retired_pending = None
    if not (isinstance(arch, int) and ampere <= arch < 0xFFFFFFFF):
        retired_pending = call("retired_pages_pending", "nvmlDeviceGetRetiredPagesPendingStatus")
    return {
        "ecc_uncorrected_volatile": int(volatile) if volatile is not None else None,
        "ecc_uncorrected_aggregate": int(aggregate) if aggregate is not None else None,
        "remapped_rows": None
        if remapped is None
        else {
            "correctable": int(remapped[0]),
            "uncorrectable": int(remapped[1]),
            "pending": bool(remapped[2]),
            "failure": bool(remapped[3]),
        },
        "retired_pages_pending": None if retired_pending is None else bool(retired_pending),
    }


def _nvml_pcie_link(nv: Any, handle: Any) -> JsonDict | None:
    """The GPU's PCIe link now and at most (generation, width); best effort, no problem noted."""
    link = {
        key: _nvml_call(nv, {}, "", function, handle)
        for key, function in (
            ("gen_current", "nvmlDeviceGetCurrPcieLinkGeneration"),
            ("gen_max", "nvmlDeviceGetMaxPcieLinkGeneration"),
            ("width_current", "nvmlDeviceGetCurrPcieLinkWidth"),
            ("width_max", "nvmlDeviceGetMaxPcieLinkWidth"),
        )
    }
    return {k: int(v) for k, v in link.items() if v is not None} or None


def _nvml_gpu(nv: Any, index: int, problems: dict[str, str]) -> JsonDict:
    handle = nv.nvmlDeviceGetHandleByIndex(index)
    prefix = f"gpus[{index}]."

    def call(field: str, fname: str, *args: Any) -> Any:
        return _nvml_call(nv, problems, prefix + field, fname, handle, *args)

    memory = _nvml_memory(nv, handle, problems, prefix + "memory")
    pci = call("pci_bus_id", "nvmlDeviceGetPciInfo")
    ecc = call("ecc_mode", "nvmlDeviceGetEccMode")
    temperature = call("temperature_c", "nvmlDeviceGetTemperature", getattr(nv, "NVML_TEMPERATURE_GPU", 0))
    power_mw = call("power_w", "nvmlDeviceGetPowerUsage")
    procs = call("processes", "nvmlDeviceGetComputeRunningProcesses")

    mig = call("mig_mode", "nvmlDeviceGetMigMode")
    # None: the query failed or is not supported here, which is not the same as "no process".
    processes = None if procs is None else [_nvml_process(nv, proc) for proc in procs]
    name = call("name", "nvmlDeviceGetName")
    uuid = call("uuid", "nvmlDeviceGetUUID")
    # Best effort, without a problem noted: these say more about health than identity.
    quiet: dict[str, str] = {}
    serial = _nvml_call(nv, quiet, "", "nvmlDeviceGetSerial", handle)
    persistence = _nvml_call(nv, quiet, "", "nvmlDeviceGetPersistenceMode", handle)
    reasons_function = (
        "nvmlDeviceGetCurrentClocksEventReasons"
        if hasattr(nv, "nvmlDeviceGetCurrentClocksEventReasons")
        else "nvmlDeviceGetCurrentClocksThrottleReasons"
    )
    reasons = _nvml_call(nv, quiet, "", reasons_function, handle)
    return {
        **_nvml_settings(nv, handle, ecc, mig),
        **_nvml_firmware(nv, handle),
        "link_errors": _nvml_link_errors(nv, handle),
        "serial": text_of(serial) if serial is not None else None,
        "pcie_link": _nvml_pcie_link(nv, handle),
        "fabric": _nvml_fabric(nv, handle),
        "nvlink": _nvml_nvlinks(nv, handle),
        # NVML_FEATURE_ENABLED = 1
        "persistence_mode": None
        if persistence is None
        else ("enabled" if int(persistence) == 1 else "disabled"),
        "clock_event_reasons": int(reasons) if reasons is not None else None,
        "index": index,
        "name": text_of(name) if name is not None else None,
        "uuid": text_of(uuid) if uuid is not None else None,
        "pci_bus_id": text_of(pci.busId) if pci is not None else None,
        "memory_total_bytes": int(memory.total) if memory is not None else None,
        "memory_used_bytes": int(memory.used) if memory is not None else None,
        "memory_free_bytes": int(memory.free) if memory is not None else None,
        "ecc_mode": None if ecc is None else ("enabled" if int(ecc[0]) else "disabled"),
        **_nvml_memory_errors(nv, handle, call),
        # nvmlDeviceGetMigMode: (current, pending), NVML_DEVICE_MIG_ENABLE = 1.
        "mig_mode": None if mig is None else ("enabled" if int(mig[0]) == 1 else "disabled"),
        "processes": processes,
        "temperature_c": int(temperature) if temperature is not None else None,
        "power_w": round(power_mw / 1000.0, 2) if power_mw is not None else None,
    }


def _nvml_nvlinks(nv: Any, handle: Any) -> JsonDict | None:
    """nvmlDeviceGetNvLinkState over every link NVML can name, as :func:`nvlinks_from_smi` gives
    them; a link the GPU does not have answers an error and is left out. None: no NVLink."""
    if not hasattr(nv, "nvmlDeviceGetNvLinkState"):
        return None
    active, inactive = 0, []
    for link in range(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))):
        state = _nvml_call(nv, {}, "", "nvmlDeviceGetNvLinkState", handle, link)
        if state is None:
            continue
        if int(state) == getattr(nv, "NVML_FEATURE_ENABLED", 1):
            active += 1
        else:
            inactive.append(link)
    return {"active": active, "inactive": inactive} if active or inactive else None


def _nvml_fabric(nv: Any, handle: Any) -> JsonDict | None:
    """nvmlDeviceGetGpuFabricInfo, as :func:`gpu_fabric` gives it; None where the GPU or this NVML
    has no fabric probe (not a problem: most GPUs have no NVSwitch)."""
    info_type = getattr(nv, "c_nvmlGpuFabricInfo_t", None)
    if info_type is None or not hasattr(nv, "nvmlDeviceGetGpuFabricInfo"):
        return None
    info = info_type()
    try:
        if _nvml_call(nv, {}, "", "nvmlDeviceGetGpuFabricInfo", handle, ctypes.byref(info)) is None:
            return None
    except (TypeError, ValueError, ctypes.ArgumentError):  # a pynvml whose struct does not fit
        return None
    state = NVML_FABRIC_STATES.get(int(info.state))
    if state is None:
        return None
    code = int(info.status)
    status = "Success" if code == 0 else _nvml_call(nv, {}, "", "nvmlErrorString", code)
    return gpu_fabric(state, text_of(status) if status is not None else f"NVML error {code}")


def nvml_snapshot(nv: Any) -> tuple[JsonDict, list[JsonDict], dict[str, str]]:
    """Driver, GPUs and per-field problems read through pynvml module ``nv``.

    Raises Unavailable when NVML cannot start. nvmlShutdown is always called after a
    successful nvmlInit.
    """
    base, _ = _nvml_error_types(nv)
    try:
        nv.nvmlInit()
    except base as exc:
        raise Unavailable(f"NVML: {exc}") from None
    try:
        problems: dict[str, str] = {}
        driver_version = _nvml_call(nv, problems, "driver", "nvmlSystemGetDriverVersion")
        cuda_code = _nvml_call(nv, problems, "driver.cuda", "nvmlSystemGetCudaDriverVersion_v2")
        driver: JsonDict = {
            "version": text_of(driver_version) if driver_version is not None else None,
            "cuda": decode_cuda_version(int(cuda_code)) if cuda_code else None,
            "source": "nvml",
        }
        count = int(nv.nvmlDeviceGetCount())
        gpus = []
        for index in range(count):
            try:
                gpus.append(_nvml_gpu(nv, index, problems))
            except base as exc:
                problems[f"gpus[{index}]"] = f"NVML: {exc}"
        return driver, gpus, problems
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()
