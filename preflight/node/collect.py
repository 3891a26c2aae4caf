"""The facts document: every gatherer run in turn, one that fails noted and passed over, and what
was found scrubbed of secrets.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from preflight.node import hardware, nccl, net, nvidia, pcie_devices, scratch, stack, system
from preflight.node.gathering import Sink, Unavailable
from preflight.node.masking import scrub
from preflight.node.shared import error_text

if TYPE_CHECKING:
    from collections.abc import Callable, Iterable, Mapping

    JsonDict = dict[str, Any]

PROBE_VERSION = 1


def _gatherers() -> list[tuple[tuple[str, ...], Callable[[Sink], None]]]:
    """Every gatherer, in the order they run, with the facts it gives (``skip`` names the first)."""
    return [
        (("hostname",), system.gather_hostname),
        (("identity",), system.gather_identity),
        (("dmi",), system.gather_dmi),
        (("os",), system.gather_os),
        (("cpu",), system.gather_cpu),
        (("memory",), system.gather_memory),
        (("nvme",), system.gather_nvme),
        (("python",), stack.gather_python),
        (("nccl_system", "cudnn_system"), stack.gather_system_libraries),
        (("driver", "gpus"), nvidia.gather_nvidia),
        (("nvcc",), stack.gather_nvcc),
        (("packages",), stack.gather_packages),
        (("env",), stack.gather_env),
        (("limits",), system.gather_limits),
        (("shm",), system.gather_shm),
        (("scratch",), scratch.gather_scratch),
        (("nccl",), nccl.gather_nccl),
        (("time",), system.gather_time),
        (("name_resolution",), net.gather_name_resolution),
        (("net",), net.gather_net),
        (("hardware",), hardware.gather_hardware),
        (("pci_devices",), pcie_devices.gather_pci_devices),
        (("sysctl",), system.gather_sysctl),
        (("kernel_modules",), system.gather_kernel_modules),
        (("torch",), stack.gather_torch),
    ]


def collect(options: Mapping[str, Any] | None = None, skip: Iterable[str] = ()) -> JsonDict:
    """Gather every fact this node can give (but the gatherers of ``skip``); the probe's whole
    JSON document."""
    sink = Sink(options)
    for names, gather in _gatherers():
        if names[0] in skip:
            continue
        try:
            gather(sink)
        except Unavailable as exc:
            reason = str(exc)
        except (Exception, SystemExit) as exc:
            reason = f"{names[0]} gatherer failed: {error_text(exc)}"
        else:
            continue
        for name in names:
            if name not in sink.facts and name not in sink.unavailable:
                sink.unavailable[name] = reason
    facts = scrub(sink.facts)
    facts["unavailable"] = scrub(sink.unavailable)
    return {"probe_version": PROBE_VERSION, "facts": facts}
