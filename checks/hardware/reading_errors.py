"""Readings a tool answered with an error instead of a value, judged as faults of the part: a GPU
that answers nvidia-smi or NVML "Unknown Error", "GPU is lost" or "GPU requires reset" for its
temperature, memory or ECC mode, an InfiniBand port or a PCI device whose sysfs file fails with an
I/O error (EIO). The probe keeps the tool's words on the part (``errors``,
:func:`preflight.facts_gpu.reading_errors`); "Not Supported" and "N/A" never get there, so a field
a model does not have stays silent.

Per node: the GPUs that answer nothing but errors, or that could not be opened at all
(``gpu_unreadable``: reset where the words say a reset is required, else drain the node and reset
or replace the GPU), the GPUs with some readings in error (``gpu_reading_errors``), the ports
(``port_reading_errors``) and the PCI devices (``pci_reading_errors``), each a failure naming the
part and the tool's words. "Insufficient Permissions" is the probe's rights, not the part's fault:
a warning (``reading_permissions``), nodes alike folded. A GPU's PCI device is not named again
where the GPU itself is, and "Corrupted infoROM" on a GPU whose InfoROM NVML found corrupted is the
``versions`` check's finding (``gpu_inforom_corrupt``).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

from checks.hardware.details import ReadingError, ReadingErrors, ReadingPermissions
from checks.hardware.ib_ports import port_errors, port_label
from checks.hardware.kernel_log import gpus_by_pci
from checks.hardware.pcie_errors import KIND_TEXT
from preflight.facts import GpuFacts, NodeFacts
from preflight.facts_gpu import reading_errors
from preflight.model import CheckResult
from preflight.node.hardware import pci_key
from preflight.nodeset import fold, group_by_value

NAME = "hardware"
# How a finding names a reading; a key not listed is its name with spaces.
READING_TEXT = {
    "handle": "opening it",
    "pci_bus_id": "PCI bus id",
    "uuid": "UUID",
    "memory_total_bytes": "memory",
    "memory_used_bytes": "memory",
    "memory_free_bytes": "memory",
    "ecc_mode": "ECC mode",
    "ecc_mode_pending": "ECC mode",
    "ecc_uncorrected_volatile": "ECC errors",
    "ecc_uncorrected_aggregate": "ECC errors",
    "mig_mode": "MIG mode",
    "mig_mode_pending": "MIG mode",
    "temperature_c": "temperature",
    "power_w": "power",
    "power_limit_w": "power limit",
    "power_default_limit_w": "power limit",
    "pcie_link": "PCIe link",
    "nvlink": "NVLinks",
    "fabric": "fabric state",
    "clocks_applications_mhz": "applications clocks",
    "clocks_default_applications_mhz": "applications clocks",
    "vbios_version": "VBIOS version",
    "inforom_image": "InfoROM version",
    "inforom_valid": "InfoROM check",
    "link_errors": "link error counters",
    "numa_node": "NUMA node",
    "aer_dev_correctable": "correctable AER count",
    "aer_dev_nonfatal": "non-fatal AER count",
    "aer_dev_fatal": "fatal AER count",
}


def reading_text(key: str) -> str:
    """``temperature_c`` -> ``temperature``; a counter's file (``counters/symbol_error``) ->
    ``symbol_error counter``."""
    if "/" in key:
        return f"{key.rsplit('/', 1)[-1]} counter"
    return READING_TEXT.get(key, key.replace("_", " "))


def _and(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def answers(errors: Mapping[str, str]) -> str:
    """``answers "Unknown Error" for temperature, power and ECC mode``: the readings grouped by the
    tool's words, each reading named once."""
    by_words: dict[str, list[str]] = {}
    for key, words in errors.items():
        named = by_words.setdefault(words, [])
        if reading_text(key) not in named:
            named.append(reading_text(key))
    return "answers " + ", ".join(f'"{words}" for {_and(named)}' for words, named in by_words.items())


def asks_reset(words: str) -> bool:
    """The tool's words say the GPU needs a reset: nvidia-smi's "GPU requires reset", pynvml's "GPU
    requires restart" (NVML_ERROR_RESET_REQUIRED)."""
    text = words.lower()
    return "reset" in text or "requires restart" in text


def is_permission(words: str) -> bool:
    """NVML_ERROR_NO_PERMISSION ("Insufficient Permissions"): the probe's rights, not the part."""
    return "permission" in words.lower()


def gpu_label(gpu: GpuFacts) -> str:
    """``GPU 3 (serial 1654922005123)``, or with its bus id where the serial is not known."""
    index = gpu.index if gpu.index is not None else "?"
    bus = gpu.raw.get("pci_bus_id")
    where = f"serial {gpu.serial}" if gpu.serial else (bus if isinstance(bus, str) and bus else "")
    return f"GPU {index} ({where})" if where else f"GPU {index}"


def gpu_faults(gpu: GpuFacts) -> dict[str, str]:
    """The GPU's readings in error that are its own fault: not the probe's rights, and not a
    corrupted InfoROM NVML already found (the ``versions`` check names that)."""
    own = _own(gpu.errors)
    return {k: w for k, w in own.items() if not ("inforom" in w.lower() and gpu.inforom_valid is False)}


def _part(label: str, gpu: int | None, errors: Mapping[str, str]) -> ReadingError:
    return {"part": label, "gpu": gpu, "errors": dict(errors)}


def _fail(host: str, item: str, text: str, parts: list[ReadingError], action: str) -> CheckResult:
    details: ReadingErrors = {"item": item, "node": host, "parts": parts, "action": action}
    if item.startswith("gpu_"):
        details["gpus"] = [p["gpu"] for p in parts]
    return CheckResult(NAME, "fail", f"{host}: {text}", (host,), details)


def _unreadable(host: str, gpus: Sequence[GpuFacts]) -> CheckResult:
    """The GPUs that answer nothing but errors: reset them where every one says it needs a reset,
    else drain the node and reset or replace them."""
    shown = []
    for gpu in gpus:
        faults = gpu_faults(gpu)
        if "handle" in faults:
            shown.append(f'{gpu_label(gpu)} cannot be opened ("{faults["handle"]}")')
        else:
            words = Counter(faults.values()).most_common(1)[0][0]
            shown.append(f'{gpu_label(gpu)} answers "{words}" for every reading')
    reset = all(any(asks_reset(w) for w in gpu_faults(g).values()) for g in gpus)
    them = "it" if len(gpus) == 1 else "them"
    if reset:
        targets = ",".join(str(g.index if g.index is not None else g.raw.get("pci_bus_id")) for g in gpus)
        action = f"reset {them} (nvidia-smi -r -i {targets}) before the run"
    else:
        action = f"drain the node and reset or replace {'the GPU' if len(gpus) == 1 else 'these GPUs'}"
    parts = [_part(gpu_label(g), g.index, gpu_faults(g)) for g in gpus]
    text = f"{'; '.join(shown)}: {action}"
    return _fail(host, "gpu_unreadable", text, parts, "reset_gpu" if reset else "drain")


def _gpu_findings(host: str, gpus: Sequence[GpuFacts]) -> list[CheckResult]:
    faulty = [g for g in gpus if gpu_faults(g)]
    results = []
    unreadable = [g for g in faulty if g.unreadable]
    if unreadable:
        results.append(_unreadable(host, unreadable))
    partial = [g for g in faulty if not g.unreadable]
    if partial:
        text = "; ".join(f"{gpu_label(g)} {answers(gpu_faults(g))}" for g in partial)
        reset = all(asks_reset(w) for g in partial for w in gpu_faults(g).values())
        parts = [_part(gpu_label(g), g.index, gpu_faults(g)) for g in partial]
        results.append(_fail(host, "gpu_reading_errors", text, parts, "reset_gpu" if reset else "drain"))
    return results


def _named(rows: Iterable[tuple[str, Mapping[str, str]]]) -> str:
    return "; ".join(f"{label} {answers(errors)}" for label, errors in rows)


def _part_findings(host: str, node: NodeFacts, gpus_named: set[str]) -> list[CheckResult]:
    """The node's ports and PCI devices whose files failed with an I/O error; a GPU's device is
    left out where the GPU itself is named (one cause)."""
    results = []
    ports = [(port_label(p), f) for p, e in port_errors(node) if (f := _own(e))]
    if ports:
        parts = [_part(label, None, errors) for label, errors in ports]
        results.append(_fail(host, "port_reading_errors", _named(ports), parts, "drain"))
    gpus = gpus_by_pci(node)
    devices = []
    for device in node.pci_devices:
        errors = reading_errors(device)
        address = str(device.get("address", ""))
        if not errors or pci_key(address) in gpus_named:
            continue
        where = gpus.get(pci_key(address)) or KIND_TEXT.get(str(device.get("kind")), "device")
        devices.append((f"{where} ({address})", errors))
    if devices:
        parts = [_part(label, None, errors) for label, errors in devices]
        results.append(_fail(host, "pci_reading_errors", _named(devices), parts, "drain"))
    return results


def _own(errors: Mapping[str, str]) -> dict[str, str]:
    """The errors that are the part's own: all but the probe's rights."""
    return {key: words for key, words in errors.items() if not is_permission(words)}


def _denied(errors: Mapping[str, str]) -> dict[str, str]:
    return {key: words for key, words in errors.items() if is_permission(words)}


def _permissions(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """Readings the probe's user may not make, nodes that say the same folded: a warning."""
    texts: dict[str, str] = {}
    parts: dict[str, list[ReadingError]] = {}
    for host, node in nodes.items():
        # By index alone, so that nodes alike fold.
        rows = [
            (f"GPU {g.index if g.index is not None else '?'}", g.index, _denied(g.errors))
            for g in node.gpus or []
        ]
        rows += [(port_label(p), None, _denied(e)) for p, e in port_errors(node)]
        rows = [row for row in rows if row[2]]
        if rows:
            texts[host] = _named((label, errors) for label, _, errors in rows)
            parts[host] = [_part(label, index, errors) for label, index, errors in rows]
    results = []
    for text, hosts in group_by_value(texts):
        details: ReadingPermissions = {
            "item": "reading_permissions",
            "nodes": hosts,
            "parts": parts[hosts[0]],
            "action": "fix_config",
        }
        summary = (
            f"{fold(hosts)}: {text}: the probe's user may not read them (its rights, not a fault of the part)"
        )
        results.append(CheckResult(NAME, "warn", summary, tuple(hosts), details))
    return results


def judge_reading_errors(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """Per node, a failure for each kind of part whose readings a tool answered with an error; the
    warnings on the probe's rights after them."""
    results: list[CheckResult] = []
    for host, node in nodes.items():
        gpus = node.gpus or []
        results += _gpu_findings(host, gpus)
        named = {
            pci_key(bus) for g in gpus if gpu_faults(g) and isinstance(bus := g.raw.get("pci_bus_id"), str)
        }
        results += _part_findings(host, node, named)
    return results + _permissions(nodes)
