"""GPU settings that change a job's speed or what it sees of a GPU, judged across the nodes and
against each GPU's own default: the enforced power limit, the applications clocks, the compute
mode, the ECC and MIG modes a GPU takes at its next reboot or reset; and a node whose NVML refuses
its kernel module (a driver/library version mismatch). Pure: facts in, findings out.

A GPU away from its default where the other GPUs of its model keep another value is a warning (it
is slower than its peers); the same value on every GPU of a model is the site's choice, a note. A
GPU no process may use (compute mode Prohibited), a mode that changes at the next reboot or reset
(the node would no longer be the one checked) and a version mismatch (no CUDA, no NVML) fail.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from checks.hardware.details import DriverMismatch, GpuSetting
from preflight.facts import GpuFacts, NodeFacts
from preflight.model import CheckResult
from preflight.nodeset import fold, natural_key
from preflight.status import Status

NAME = "hardware"
# How a kernel module and its user-space library are brought back in step without a reboot.
RELOAD_MODULE = "rmmod nvidia_uvm nvidia_drm nvidia_modeset nvidia && modprobe nvidia"
HOLDERS = "nvidia-persistenced, DCGM (nv-hostengine), nvidia-fabricmanager and GPU containers"


@dataclass(frozen=True)
class _Setting:
    """A setting compared with its default: ``read`` gives (value, default) as shown text."""

    item: str
    name: str
    read: Callable[[GpuFacts], tuple[str | None, str | None]]
    restore: Callable[[str, str], str]  # (-i part, default) -> the command that restores it


def _watts(value: float | None) -> str | None:
    return None if value is None else f"{value:g} W"


def _power(gpu: GpuFacts) -> tuple[str | None, str | None]:
    return _watts(gpu.power_limit_w), _watts(gpu.power_default_limit_w)


def _clocks_text(clocks: Mapping[str, int]) -> str | None:
    if not clocks:
        return None
    return ", ".join(f"{domain} {mhz} MHz" for domain, mhz in sorted(clocks.items()))


def _clocks(gpu: GpuFacts) -> tuple[str | None, str | None]:
    return _clocks_text(gpu.applications_clocks), _clocks_text(gpu.default_applications_clocks)


def _compute(gpu: GpuFacts) -> tuple[str | None, str | None]:
    mode = gpu.compute_mode
    return (mode, "default") if mode else (None, None)


SPEED_SETTINGS = (
    _Setting(
        "gpu_power_limit",
        "enforced power limit",
        _power,
        lambda at, default: f"nvidia-smi{at} -pl {default.removesuffix(' W')}",
    ),
    _Setting("gpu_app_clocks", "applications clocks", _clocks, lambda at, _: f"nvidia-smi{at} -rac"),
    _Setting("gpu_compute_mode", "compute mode", _compute, lambda at, _: f"nvidia-smi{at} -c 0"),
)


@dataclass(frozen=True)
class _GpuValue:
    """One GPU's value of a setting, and the default it is held to."""

    host: str
    gpu: GpuFacts
    value: str
    default: str


def _gpus_at(by_host: Mapping[str, Sequence[int | None]], counts: Mapping[str, int]) -> str:
    """``node[1-2]`` where every GPU of those nodes is meant, else ``node3 GPU 2, 5``."""
    whole = [h for h, indices in by_host.items() if len(indices) == counts[h]]
    parts = [fold(whole)] if whole else []
    for host, indices in by_host.items():
        if host not in whole:
            shown = ", ".join("?" if i is None else str(i) for i in indices)
            parts.append(f"{host} GPU{'s' if len(indices) > 1 else ''} {shown}")
    return "; ".join(parts)


def _by_value(seen: Iterable[_GpuValue]) -> dict[str, dict[str, list[int | None]]]:
    """value -> node -> GPU indices, nodes in natural order."""
    found: dict[str, dict[str, list[int | None]]] = {}
    for entry in sorted(seen, key=lambda s: natural_key(s.host)):
        found.setdefault(entry.value, {}).setdefault(entry.host, []).append(entry.gpu.index)
    return found


def _sides(values: Mapping[str, Mapping[str, list[int | None]]], counts: Mapping[str, int]) -> str:
    return "; ".join(f"{value} on {_gpus_at(hosts, counts)}" for value, hosts in values.items())


def _command(setting: _Setting, off: Sequence[_GpuValue], counts: Mapping[str, int], default: str) -> str:
    """The command, with ``-i`` naming the GPUs where not every GPU of their nodes is meant."""
    indices = sorted({s.gpu.index for s in off if s.gpu.index is not None})
    per_host = Counter(s.host for s in off)
    whole = all(per_host[h] == counts[h] for h in per_host)
    at = "" if whole or not indices else f" -i {','.join(str(i) for i in indices)}"
    return setting.restore(at, default)


def _speed_findings(setting: _Setting, nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """GPUs whose setting differs from their default: a warning (a failure for a Prohibited
    compute mode) for those whose model elsewhere keeps another value, a note for a value every
    GPU of the model shares."""
    counts = {h: len(n.gpus or []) for h, n in nodes.items()}
    seen: list[_GpuValue] = []
    for host, node in nodes.items():
        for gpu in node.gpus or []:
            value, default = setting.read(gpu)
            if value is not None and default is not None:
                seen.append(_GpuValue(host, gpu, value, default))
    off = [s for s in seen if s.value != s.default]
    if not off:
        return []
    usual = {
        model: values.most_common(1)[0][0]
        for model in {s.gpu.name for s in seen}
        if (values := Counter(s.value for s in seen if s.gpu.name == model))
    }
    unusable = [s for s in off if s.value == "prohibited"]
    odd = [s for s in off if s.value != usual[s.gpu.name] and s not in unusable]
    alike = [s for s in off if s not in odd and s not in unusable]
    results: list[CheckResult] = []
    groups: tuple[tuple[list[_GpuValue], Status | None], ...] = (
        (unusable, "fail"),
        (odd, "warn"),
        (alike, None),
    )
    for group, status in groups:
        if not group:
            continue
        default = group[0].default
        hosts = tuple(dict.fromkeys(s.host for s in sorted(group, key=lambda s: natural_key(s.host))))
        others = [s for s in seen if s.gpu.name in {g.gpu.name for g in group} and s not in group]
        command = _command(setting, group, counts, default)
        summary = f"{setting.name} {_sides(_by_value(group), counts)}"
        if others:
            summary += f", {_sides(_by_value(others), counts)}"
        summary += f" (the GPU's default: {default}); {command} restores it"
        details: GpuSetting = {
            "item": setting.item,
            "setting": setting.name,
            "values": _by_value(group),
            "default": default,
            "command": command,
        }
        if status is None:
            results.append(CheckResult.note(NAME, summary + ": the same on every such GPU", hosts, details))
            continue
        if status == "fail":
            details["action"] = "fix_config"
            summary += ": no process can use the GPU"
        results.append(CheckResult(NAME, status, summary, hosts, details))
    return results


def _ecc_modes(gpu: GpuFacts) -> tuple[str | None, str | None]:
    return gpu.ecc_mode, gpu.ecc_mode_pending


def _mig_modes(gpu: GpuFacts) -> tuple[str | None, str | None]:
    return gpu.mig_mode, gpu.mig_mode_pending


def _pending_findings(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """GPUs whose ECC or MIG mode changes at the next reboot or GPU reset: the node would then
    differ from the one checked (ECC changes the memory size; MIG hides the whole GPU)."""
    results: list[CheckResult] = []
    counts = {h: len(n.gpus or []) for h, n in nodes.items()}
    kinds: tuple[tuple[str, str, str, str, Callable[[GpuFacts], tuple[str | None, str | None]]], ...] = (
        ("gpu_ecc_pending", "ECC", "the next reboot", "-e", _ecc_modes),
        ("gpu_mig_pending", "MIG", "the next GPU reset or reboot", "-mig", _mig_modes),
    )
    for item, mode, when, flag, read in kinds:
        pending = [
            _GpuValue(host, gpu, f"{now} now, {later} after {when}", now)
            for host, node in nodes.items()
            for gpu in node.gpus or []
            for now, later in [read(gpu)]
            if now and later and now != later
        ]
        if not pending:
            continue
        keep = pending[0].default
        indices = sorted({s.gpu.index for s in pending if s.gpu.index is not None})
        at = f" -i {','.join(str(i) for i in indices)}" if indices else ""
        command = f"nvidia-smi{at} {flag} {1 if keep == 'enabled' else 0}"
        values = _by_value(pending)
        summary = (
            f"{mode} {_sides(values, counts)}: the node would change under the job; "
            f"{command} keeps it {keep}, or reset the GPUs (nvidia-smi -r) or reboot to apply it"
        )
        details: GpuSetting = {
            "item": item,
            "setting": f"{mode} mode",
            "values": values,
            "default": keep,
            "command": command,
            "action": "reset_gpu",
        }
        hosts = tuple(dict.fromkeys(s.host for s in sorted(pending, key=lambda s: natural_key(s.host))))
        results.append(CheckResult(NAME, "fail", summary, hosts, details))
    return results


def _mismatch_findings(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """Nodes whose NVML refused the loaded kernel module: an upgrade's new user-space library
    beside the old module. No CUDA process starts there until they match again."""
    results: list[CheckResult] = []
    for host, node in nodes.items():
        found = node.driver_mismatch
        if not found:
            continue
        module = found.get("module") if isinstance(found.get("module"), str) else None
        library = found.get("library") if isinstance(found.get("library"), str) else None
        summary = (
            f"{host}: driver/library version mismatch: kernel module {module or 'version unknown'}, "
            f"user-space library (libnvidia-ml) {library or 'version unknown'}: no CUDA process can "
            f"start. Reboot the node, or stop what holds the GPUs ({HOLDERS}) and reload the "
            f"kernel module ({RELOAD_MODULE})"
        )
        details: DriverMismatch = {
            "item": "driver_mismatch",
            "node": host,
            "module": module,
            "library": library,
            "action": "fix_config",
        }
        results.append(CheckResult(NAME, "fail", summary, (host,), details))
    return results


def judge_gpu_settings(nodes: Mapping[str, NodeFacts]) -> list[CheckResult]:
    """Findings and notes for the GPU settings and driver versions of ``nodes``."""
    results = _mismatch_findings(nodes) + _pending_findings(nodes)
    for setting in SPEED_SETTINGS:
        results += _speed_findings(setting, nodes)
    return results
