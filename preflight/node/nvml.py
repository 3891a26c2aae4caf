"""GPU facts through NVML (pynvml, where the node has it): the driver, every GPU's identity, memory,
ECC and row remapping, processes, PCIe and NVLink links, NVSwitch fabric registration, the
settings that change its speed or capacity, and its firmware (VBIOS, InfoROM); errors of the GPU
("GPU is lost") in its ``errors`` by fact.
"""

from __future__ import annotations

import contextlib
import ctypes
from typing import TYPE_CHECKING, Any

from preflight.node.gathering import Unavailable, read_text
from preflight.node.shared import decode_cuda_version, text_of
from preflight.node.smi import COMPUTE_MODES, gpu_fabric
from preflight.node.smi_counters import LINK_ERROR_KEYS

if TYPE_CHECKING:
    from collections.abc import Callable

    JsonDict = dict[str, Any]

# nvmlGpuFabricState_t (nvml.h): NOT_SUPPORTED is left out, as nvidia-smi's "Not Supported" is.
NVML_FABRIC_STATES = {1: "not_started", 2: "in_progress", 3: "completed"}


def _nvml_error_types(nv: Any) -> tuple[type[BaseException], type[BaseException] | None]:
    base = getattr(nv, "NVMLError", Exception)
    not_supported = getattr(nv, "NVMLError_NotSupported", None)
    return base, not_supported


# NVML errors that say a call does not apply here (a feature or link the GPU lacks), not that the
# GPU failed: NVML_ERROR_ INVALID_ARGUMENT, NOT_SUPPORTED, NOT_FOUND, INSUFFICIENT_SIZE,
# FUNCTION_NOT_FOUND, NO_DATA, VGPU_ECC_NOT_SUPPORTED, FREQ_NOT_SUPPORTED, ARGUMENT_VERSION_MISMATCH
# and DEPRECATED.
NVML_NOT_APPLICABLE = frozenset((2, 3, 6, 7, 13, 21, 22, 24, 25, 26))
MEMORY_FACTS = ("memory_total_bytes", "memory_used_bytes", "memory_free_bytes")


def nvml_fault(exc: BaseException) -> str | None:
    """The words of an NVML error of the GPU (``str(exc)``: "GPU is lost", "Unknown Error"); None
    for one of :data:`NVML_NOT_APPLICABLE`."""
    return None if getattr(exc, "value", None) in NVML_NOT_APPLICABLE else str(exc)


def _nvml_call(
    nv: Any,
    problems: dict[str, str],
    label: str,
    fname: str,
    *args: Any,
    errors: dict[str, str] | None = None,
) -> Any:
    """Call ``nv.<fname>(*args)``: NotSupported gives None; other errors are noted in problems, a
    fault (:func:`nvml_fault`) also in ``errors`` under the label's last part."""
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
        words = nvml_fault(exc)
        if errors is not None and words:
            errors.setdefault(label.rsplit(".", 1)[-1], words)
        return None


def _read(nv: Any, handle: Any, errors: dict[str, str] | None, fact: str, fname: str, *args: Any) -> Any:
    """One of a GPU's readings, best effort (no problem noted): a fault of the GPU in ``errors``
    under ``fact``."""
    return _nvml_call(nv, {}, fact, fname, handle, *args, errors=errors)


def _nvml_memory(nv: Any, handle: Any, problems: dict[str, str], label: str, errors: dict[str, str]) -> Any:
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
    memory = _nvml_call(nv, problems, label, "nvmlDeviceGetMemoryInfo", handle, errors=errors)
    words = errors.pop("memory", None)
    if words:
        errors.update(dict.fromkeys(MEMORY_FACTS, words))
    return memory


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


def _nvml_clocks(
    nv: Any, handle: Any, fname: str, errors: dict[str, str] | None, fact: str
) -> JsonDict | None:
    """Graphics and memory clocks (MHz) from ``fname`` (the applications clocks or their defaults);
    None where the GPU reports neither (Hopper-era drivers deprecate applications clocks)."""
    clocks = {
        key: _read(nv, handle, errors, fact, fname, getattr(nv, constant, number))
        for key, constant, number in (("graphics", "NVML_CLOCK_GRAPHICS", 0), ("memory", "NVML_CLOCK_MEM", 2))
    }
    found = {key: int(value) if value is not None else None for key, value in clocks.items()}
    return found if any(v is not None for v in found.values()) else None


def _nvml_settings(
    nv: Any, handle: Any, ecc: Any, mig: Any, errors: dict[str, str] | None = None
) -> JsonDict:
    """The settings that change speed or capacity, as :func:`gpu_settings_from_smi_row` gives
    them; best effort, without a problem noted. ``ecc`` and ``mig`` are NVML's (current, pending)
    pairs, already read."""
    enforced = _read(nv, handle, errors, "power_limit_w", "nvmlDeviceGetEnforcedPowerLimit")
    default = _read(nv, handle, errors, "power_default_limit_w", "nvmlDeviceGetPowerManagementDefaultLimit")
    compute = _read(nv, handle, errors, "compute_mode", "nvmlDeviceGetComputeMode")
    return {
        "power_limit_w": round(enforced / 1000.0, 2) if enforced is not None else None,
        "power_default_limit_w": round(default / 1000.0, 2) if default is not None else None,
        "clocks_applications_mhz": _nvml_clocks(
            nv, handle, "nvmlDeviceGetApplicationsClock", errors, "clocks_applications_mhz"
        ),
        "clocks_default_applications_mhz": _nvml_clocks(
            nv, handle, "nvmlDeviceGetDefaultApplicationsClock", errors, "clocks_default_applications_mhz"
        ),
        "ecc_mode_pending": None if ecc is None else _mode(ecc[1]),
        "mig_mode_pending": None if mig is None else _mode(mig[1]),
        "compute_mode": None if compute is None else COMPUTE_MODES.get(int(compute)),
    }


def _inforom_valid(nv: Any, handle: Any, errors: dict[str, str] | None = None) -> bool | None:
    """``nvmlDeviceValidateInforom``: True where the InfoROM checksums are valid, False where NVML
    says it is corrupted (NVML_ERROR_CORRUPTED_INFOROM, nvidia-smi's exit status 14), None where
    the GPU, driver or pynvml cannot say."""
    validate = getattr(nv, "nvmlDeviceValidateInforom", None)
    if validate is None:
        return None
    base, not_supported = _nvml_error_types(nv)
    try:
        validate(handle)
    except base as exc:
        if getattr(exc, "value", None) == getattr(nv, "NVML_ERROR_CORRUPTED_INFOROM", 14):
            return False
        words = None if not_supported and isinstance(exc, not_supported) else nvml_fault(exc)
        if errors is not None and words:
            errors.setdefault("inforom_valid", words)
        return None
    return True


def _nvml_firmware(nv: Any, handle: Any, errors: dict[str, str] | None = None) -> JsonDict:
    """The GPU's firmware: its VBIOS version, its InfoROM image version and whether the InfoROM
    is valid; best effort, without a problem noted (None where NVML cannot say)."""
    vbios = _read(nv, handle, errors, "vbios_version", "nvmlDeviceGetVbiosVersion")
    image = _read(nv, handle, errors, "inforom_image", "nvmlDeviceGetInforomImageVersion")
    return {
        "vbios_version": (text_of(vbios).strip() or None) if vbios is not None else None,
        "inforom_image": (text_of(image).strip() or None) if image is not None else None,
        "inforom_valid": _inforom_valid(nv, handle, errors),
    }


# The field value of each link error counter (:data:`LINK_ERROR_KEYS`), all read in one
# nvmlDeviceGetFieldValues call: the GPU's PCIe replays and its NVLinks' errors summed over its links
# (NVML_FI_DEV_*; the numbers are nvml.h's, for a pynvml that lacks the names).
_LINK_ERROR_FIELD_IDS = {
    "pcie_replays": ("NVML_FI_DEV_PCIE_REPLAY_COUNTER", 94),
    "nvlink_crc_flit": ("NVML_FI_DEV_NVLINK_CRC_FLIT_ERROR_COUNT_TOTAL", 38),
    "nvlink_crc_data": ("NVML_FI_DEV_NVLINK_CRC_DATA_ERROR_COUNT_TOTAL", 45),
    "nvlink_replay": ("NVML_FI_DEV_NVLINK_REPLAY_ERROR_COUNT_TOTAL", 52),
    "nvlink_recovery": ("NVML_FI_DEV_NVLINK_RECOVERY_ERROR_COUNT_TOTAL", 59),
}
LINK_ERROR_FIELDS = tuple((key, *_LINK_ERROR_FIELD_IDS[key]) for key in LINK_ERROR_KEYS)
# nvmlValueType_t -> the member of nvmlValue_t that holds it.
_VALUE_MEMBERS = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}


def _field_values(
    nv: Any, handle: Any, errors: dict[str, str], fact: str, ids: list[int]
) -> list[Any] | None:
    """``nvmlDeviceGetFieldValues`` of ``ids`` in one call, each an int or None where the GPU does
    not have it; None where NVML cannot read field values at all (a fault noted under ``fact``)."""
    if not hasattr(nv, "nvmlDeviceGetFieldValues"):
        return None
    values = _read(nv, handle, errors, fact, "nvmlDeviceGetFieldValues", ids)
    if values is None:
        return None
    found: list[Any] = []
    for value in values:
        member = _VALUE_MEMBERS.get(int(getattr(value, "valueType", -1)))
        ok = int(getattr(value, "nvmlReturn", -1)) == 0 and member is not None
        found.append(int(getattr(value.value, member)) if ok and member else None)
    return found


def _nvml_link_errors(nv: Any, handle: Any, errors: dict[str, str]) -> JsonDict | None:
    """The GPU's PCIe replay count and NVLink error counts (:data:`LINK_ERROR_FIELDS`), each None
    where the GPU does not count it (a GPU without NVLink, a field retired on newer GPUs); None
    where NVML cannot read field values at all."""
    ids = [int(getattr(nv, name, number)) for _, name, number in LINK_ERROR_FIELDS]
    values = _field_values(nv, handle, errors, "link_errors", ids)
    if values is None:
        return None
    return {key: value for (key, _, _), value in zip(LINK_ERROR_FIELDS, values)}  # noqa: B905 - one each


def _nvml_readings(nv: Any, handle: Any, errors: dict[str, str]) -> JsonDict:
    """The readings compared between like GPUs, as :func:`gpu_readings_from_smi_row` gives them:
    corrected ECC errors since the driver loaded and over the GPU's life, the SM and memory clock
    limits, the board's largest power limit and the memory's temperature (a field value:
    NVML_FI_DEV_MEMORY_TEMP, 82 in nvml.h); best effort, a fault of the GPU noted."""
    corrected = getattr(nv, "NVML_MEMORY_ERROR_TYPE_CORRECTED", 0)
    ecc = [
        _read(nv, handle, errors, key, "nvmlDeviceGetTotalEccErrors", corrected, getattr(nv, counter, number))
        for key, counter, number in (
            ("ecc_corrected_volatile", "NVML_VOLATILE_ECC", 0),
            ("ecc_corrected_aggregate", "NVML_AGGREGATE_ECC", 1),
        )
    ]
    clocks = {
        key: _read(
            nv, handle, errors, "clocks_max_mhz", "nvmlDeviceGetMaxClockInfo", getattr(nv, name, number)
        )
        for key, name, number in (("sm", "NVML_CLOCK_SM", 1), ("memory", "NVML_CLOCK_MEM", 2))
    }
    limits = _read(nv, handle, errors, "power_max_limit_w", "nvmlDeviceGetPowerManagementLimitConstraints")
    temperature = _field_values(
        nv, handle, errors, "memory_temperature_c", [int(getattr(nv, "NVML_FI_DEV_MEMORY_TEMP", 82))]
    )
    return {
        "ecc_corrected_volatile": None if ecc[0] is None else int(ecc[0]),
        "ecc_corrected_aggregate": None if ecc[1] is None else int(ecc[1]),
        "clocks_max_mhz": {k: int(v) for k, v in clocks.items() if v is not None} or None,
        "power_max_limit_w": round(limits[1] / 1000.0, 2) if limits is not None else None,
        "memory_temperature_c": temperature[0] if temperature else None,
    }


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


def _nvml_pcie_link(nv: Any, handle: Any, errors: dict[str, str]) -> JsonDict | None:
    """The GPU's PCIe link now and at most (generation, width); best effort, no problem noted."""
    link = {
        key: _read(nv, handle, errors, "pcie_link", function)
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
    errors: dict[str, str] = {}

    def call(field: str, fname: str, *args: Any) -> Any:
        return _nvml_call(nv, problems, prefix + field, fname, handle, *args, errors=errors)

    memory = _nvml_memory(nv, handle, problems, prefix + "memory", errors)
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
    serial = _read(nv, handle, errors, "serial", "nvmlDeviceGetSerial")
    persistence = _read(nv, handle, errors, "persistence_mode", "nvmlDeviceGetPersistenceMode")
    reasons_function = (
        "nvmlDeviceGetCurrentClocksEventReasons"
        if hasattr(nv, "nvmlDeviceGetCurrentClocksEventReasons")
        else "nvmlDeviceGetCurrentClocksThrottleReasons"
    )
    reasons = _read(nv, handle, errors, "clock_event_reasons", reasons_function)
    found = {
        **_nvml_settings(nv, handle, ecc, mig, errors),
        **_nvml_firmware(nv, handle, errors),
        **_nvml_readings(nv, handle, errors),
        "link_errors": _nvml_link_errors(nv, handle, errors),
        "serial": text_of(serial) if serial is not None else None,
        "pcie_link": _nvml_pcie_link(nv, handle, errors),
        "fabric": _nvml_fabric(nv, handle, errors),
        "nvlink": _nvml_nvlinks(nv, handle, errors),
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
    if errors:
        found["errors"] = errors
    return found


def _nvml_nvlinks(nv: Any, handle: Any, errors: dict[str, str]) -> JsonDict | None:
    """nvmlDeviceGetNvLinkState over every link NVML can name, as :func:`nvlinks_from_smi` gives
    them; a link the GPU does not have answers an error and is left out. None: no NVLink."""
    if not hasattr(nv, "nvmlDeviceGetNvLinkState"):
        return None
    active, inactive = 0, []
    for link in range(int(getattr(nv, "NVML_NVLINK_MAX_LINKS", 18))):
        state = _read(nv, handle, errors, "nvlink", "nvmlDeviceGetNvLinkState", link)
        if state is None:
            continue
        if int(state) == getattr(nv, "NVML_FEATURE_ENABLED", 1):
            active += 1
        else:
            inactive.append(link)
    return {"active": active, "inactive": inactive} if active or inactive else None


def _nvml_fabric(nv: Any, handle: Any, errors: dict[str, str]) -> JsonDict | None:
    """nvmlDeviceGetGpuFabricInfo, as :func:`gpu_fabric` gives it; None where the GPU or this NVML
    has no fabric probe (not a problem: most GPUs have no NVSwitch)."""
    info_type = getattr(nv, "c_nvmlGpuFabricInfo_t", None)
    if info_type is None or not hasattr(nv, "nvmlDeviceGetGpuFabricInfo"):
        return None
    info = info_type()
    try:
        if _read(nv, handle, errors, "fabric", "nvmlDeviceGetGpuFabricInfo", ctypes.byref(info)) is None:
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
                # A GPU NVML cannot open (lost, or waiting for a reset) is still one of the node's.
                words = nvml_fault(exc)
                if words:
                    gpus.append({"index": index, "errors": {"handle": words}})
        return driver, gpus, problems
    finally:
        with contextlib.suppress(Exception):
            nv.nvmlShutdown()
