"""Every field the facts hold for a part, with its nature (:mod:`checks.readings.nature`): what the
general comparison of like parts compares, and how. A field the probe reads that is declared
nowhere here is compared as a setting and listed as undeclared in the check's details, so that
someone decides what it is. ``docs/readings.md`` lists these tables (a test keeps it so).

Thresholds of spread readings, and why: healthy idle GPUs of one model in one cluster idle within
about 15 C of each other (31-44 C on a rack of H100s), so a GPU is named only 20 C or more above
its like GPUs' median (and beyond five robust standard deviations of theirs); idle power is 60-130 W
on healthy H100s, so 100 W above the median is a GPU doing work it should not (a context left
behind, clocks held up).
"""

from __future__ import annotations

from typing import Any

from checks.readings.nature import Field, counter, identity, ruled, setting, spread
from checks.versions.judge import ITEMS as VERSION_ITEMS

MOMENTARY = "a momentary state: it changes from one second to the next"


def _on_off(value: Any) -> str | None:
    """A size as on (above zero) or off: the swap of a node, whatever its size."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return "on" if value > 0 else "off"


GPU_FIELDS: tuple[Field, ...] = (
    identity("index", "the GPU's number on its node"),
    identity("name", "the GPU's model: what like GPUs share"),
    identity("uuid", "the GPU's own identity"),
    identity("serial", "the GPU's own identity"),
    identity("pci_bus_id", "where the GPU sits on its node's bus"),
    identity("clock_event_reasons", MOMENTARY),
    ruled("memory_total_bytes", "gpu_memory: count and memory"),
    ruled("memory_used_bytes", "gpu_memory: memory in use"),
    ruled("memory_free_bytes", "gpu_memory: memory in use"),
    ruled("processes", "gpu_memory: processes holding a GPU"),
    ruled("ecc_mode", "gpu_memory: ecc_mode"),
    ruled("ecc_uncorrected_volatile", "gpu_memory: ECC errors"),
    ruled("ecc_uncorrected_aggregate", "gpu_memory: ECC errors"),
    ruled("remapped_rows", "gpu_memory: row remapping pending or failed"),
    counter("remapped_rows.correctable", "rows remapped for correctable errors"),
    ruled("retired_pages_pending", "gpu_memory: page retirement pending"),
    ruled("mig_mode", "gpu_memory and hardware: MIG modes"),
    ruled("mig_mode_pending", "hardware: gpu_mig_pending"),
    spread("temperature_c", "idle temperature", "C", 20.0, "high", idle=True),
    spread("power_w", "idle power draw", "W", 100.0, "high", idle=True),
    spread("memory_temperature_c", "idle memory temperature", "C", 20.0, "high", idle=True),
    counter("ecc_corrected_volatile", "corrected ECC errors since the driver loaded"),
    counter("ecc_corrected_aggregate", "corrected ECC errors over its life"),
    setting("clocks_max_mhz.sm", "SM clock limit (MHz)"),
    setting("clocks_max_mhz.memory", "memory clock limit (MHz)"),
    setting("power_max_limit_w", "largest power limit the board allows (W)"),
    ruled("pcie_link", "hardware: gpu_pcie_width, and the link generation against like GPUs"),
    setting("pcie_link.gen_max", "PCIe generation it can run at (its slot's)"),
    setting("pcie_link.width_max", "PCIe lanes it can use (its slot's)"),
    ruled("fabric", "hardware: gpu_fabric"),
    ruled("nvlink", "hardware: gpu_nvlink"),
    ruled("persistence_mode", "hardware: persistence_mode"),
    ruled("power_limit_w", "hardware: gpu_power_limit"),
    ruled("power_default_limit_w", "hardware: gpu_power_limit"),
    ruled("clocks_applications_mhz", "hardware: gpu_app_clocks"),
    ruled("clocks_default_applications_mhz", "hardware: gpu_app_clocks"),
    ruled("ecc_mode_pending", "hardware: gpu_ecc_pending"),
    ruled("compute_mode", "hardware: gpu_compute_mode"),
    ruled("vbios_version", "versions: gpu_vbios"),
    ruled("inforom_image", "versions: gpu_inforom"),
    ruled("inforom_valid", "versions: gpu_inforom_corrupt"),
    ruled("link_errors", "hardware: gpu_link_errors"),
    ruled("errors", "hardware: readings a tool returned as errors"),
)

PORT_FIELDS: tuple[Field, ...] = (
    identity("name", "the port's card on its node"),
    identity("port", "the port's number on its card"),
    identity("node_guid", "the card's own identity"),
    identity("node_desc", "the card's description, which names its node"),
    identity("link_layer", "the port's kind: what like ports share"),
    identity("hca_type", "the card's chip: what like ports share"),
    identity("board_id", "the card's board: what like ports share"),
    identity("virtual", "whether it is a virtual function: judged with the port's state"),
    ruled("state", "hardware: ib_port_down"),
    ruled("phys_state", "hardware: ib_port_down"),
    ruled("rate", "hardware: ib_port_rate"),
    ruled("width", "hardware: ib_port_rate"),
    ruled("counters", "hardware: ib_counters"),
    ruled("pcie", "hardware: nic_pcie_width"),
    setting("pcie.gen_max", "PCIe generation it can run at (its slot's)"),
    setting("pcie.width_max", "PCIe lanes it can use (its slot's)"),
    setting("pcie.gen_current", "PCIe generation it runs at"),
    ruled("pkeys", "hardware: ib_pkeys"),
    ruled("gids", "hardware: roce_gid_index"),
    setting("fw_ver", "firmware"),
    ruled("errors", "hardware: readings a tool returned as errors"),
)

NIC_FIELDS: tuple[Field, ...] = (
    identity("name", "the interface's name: what like interfaces share"),
    identity("addresses", "the node's own addresses"),
    identity("mac", "the card's own identity"),
    setting("mtu", "MTU"),
    setting("state", "link state"),
    setting("speed_mbps", "link speed (Mb/s)"),
    setting("driver", "driver"),
    counter("carrier_changes", "link state changes since boot", status="warn"),
    counter("statistics.rx_errors", "receive errors since boot"),
    counter("statistics.tx_errors", "transmit errors since boot"),
    counter("statistics.rx_crc_errors", "CRC errors since boot", status="warn"),
    counter("statistics.rx_frame_errors", "frame errors since boot"),
    counter("statistics.rx_missed_errors", "packets missed for want of buffers since boot"),
    counter("statistics.rx_fifo_errors", "receive FIFO overruns since boot"),
    counter("statistics.tx_carrier_errors", "carrier losses while sending since boot"),
    counter("statistics.rx_dropped", "received packets dropped since boot"),
    counter("statistics.tx_dropped", "packets dropped before sending since boot"),
    ruled("pcie", "hardware: nic_pcie_width"),
    setting("pcie.gen_max", "PCIe generation it can run at (its slot's)"),
    setting("pcie.width_max", "PCIe lanes it can use (its slot's)"),
    setting("pcie.gen_current", "PCIe generation it runs at"),
)

NODE_FIELDS: tuple[Field, ...] = (
    identity("gpus", "each GPU is compared as a part of its own"),
    identity("net", "each port and network card is compared as a part of its own"),
    identity("hostname", "the node's own name"),
    identity("identity", "the node's own identity"),
    identity("connection", "how the controller reached the node"),
    ruled("connection.shell_output", "connect: shell_output"),
    identity("unavailable", "why a fact is missing: judged with the fact"),
    identity("cpu.model", "the node's CPU: what like nodes share"),
    setting("cpu.governor", "CPU frequency governor"),
    setting("cpu.cpufreq_driver", "CPU frequency driver"),
    setting("dmi.bios_vendor", "BIOS vendor"),
    setting("dmi.bios_version", "BIOS version"),
    setting("dmi.bios_date", "BIOS date"),
    setting("dmi.board_vendor", "board vendor"),
    setting("dmi.board_name", "board"),
    setting("dmi.sys_vendor", "system vendor"),
    setting("dmi.product_name", "product"),
    ruled("cpu.count", "hardware: cpus_below_peers"),
    identity("memory.available_bytes", MOMENTARY),
    ruled("memory.total_bytes", "hardware: memory_below_peers"),
    setting("memory.swap_total_bytes", "swap", value=_on_off),
    identity("memory.swap_free_bytes", MOMENTARY),
    setting("memory.transparent_hugepage", "transparent huge pages"),
    ruled("nvme", "hardware: nvme_missing"),
    setting("os.machine", "architecture"),
    setting("python.executable", "Python interpreter"),
    setting("python.implementation", "Python implementation"),
    ruled("driver", "versions: driver and cuda"),
    identity("driver.source", "where the driver's version was read"),
    ruled("driver_mismatch", "hardware: driver_mismatch"),
    ruled("packages", "versions: packages"),
    ruled("env", "environment"),
    ruled("env_secret_digests", "environment"),
    ruled("limits.memlock", "limits: memlock"),
    ruled("limits.nofile", "limits: nofile"),
    setting("limits.nproc", "process limit"),
    setting("limits.stack", "stack size limit"),
    ruled("shm", "limits: shm"),
    ruled("scratch", "limits: scratch space"),
    ruled("nccl", "environment: nccl.conf and the NCCL network plugin"),
    ruled("time", "clocks"),
    ruled("name_resolution", "names"),
    setting("hardware.nvswitches", "NVSwitches"),
    ruled("hardware.fabric_manager_running", "hardware: fabric_manager"),
    ruled("hardware.fabric_manager", "hardware: fabric_manager, fabric_manager_version, fabric_manager_log"),
    ruled("hardware.xid", "hardware: the kernel log"),
    ruled("pci_devices", "hardware: pcie_errors and pcie_numa_layout"),
    setting("sysctl", "kernel setting"),
    setting("kernel_modules", "kernel module"),
    ruled("kernel_modules.nouveau", "hardware: denylisted_module"),
    ruled("sysctl.net.ipv4.neigh.default.gc_thresh3", "ports: neighbours"),
    ruled("torch.cuda_available", "the training job's CUDA check"),
    ruled("torch.device_count", "the training job's layout"),
    setting("torch.distributed_available", "torch.distributed available"),
    setting("torch.nccl_available", "NCCL in torch"),
    setting("torch.gloo_available", "gloo in torch"),
    *(ruled(".".join(item.path), f"versions: {item.name}") for item in VERSION_ITEMS),
)
