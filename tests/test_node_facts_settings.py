"""Node settings the facts report for comparing like nodes: swap, transparent huge pages, the CPU
frequency governors and what the firmware says the machine is; parsers on recorded outputs,
gatherers on trees laid out as the kernel lays them out."""

from __future__ import annotations

from pathlib import Path

import pytest

from preflight.facts import NodeFacts
from preflight.node import system
from preflight.node.gathering import Sink
from preflight.node.net import card_counters

DATA = Path(__file__).resolve().parent / "data" / "facts"


def data(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


def sysfs_from_dump(text: str, root: Path) -> Path:
    """A directory with one file per ``name:value`` line of a recorded dump (``grep -r .`` or
    ``for f in *; do echo "$f:$(cat $f)"``), as sysfs shows them: the value and a newline. Lines of
    subdirectories and grep's own complaints are left out."""
    root.mkdir()
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        name = name.rsplit("/dmi/id/", 1)[-1]
        if not sep or "/" in name or name == "grep":
            continue
        (root / name).write_text(value + "\n")
    return root


def test_swap_of_a_large_server_is_read_in_bytes() -> None:
    info = system.parse_meminfo(data("meminfo_swap_593g_head.txt"))
    assert info["SwapTotal"] == 500106236 * 1024
    assert info["SwapFree"] == info["SwapTotal"]  # none of it used
    assert info["MemTotal"] == 593026380 * 1024


def test_a_machine_without_swap_reports_zero_not_nothing() -> None:
    info = system.parse_meminfo(data("meminfo.txt"))
    assert (info["SwapTotal"], info["SwapFree"]) == (0, 0)


@pytest.mark.parametrize(
    ("name", "choice"),
    [("thp_enabled.txt", "madvise"), ("thp_defrag_azurelinux.txt", "madvise")],
)
def test_the_transparent_huge_page_setting_is_the_bracketed_choice(name: str, choice: str) -> None:
    assert system.bracketed_choice(data(name)) == choice


@pytest.mark.parametrize("text", [None, "", "always madvise never\n"])
def test_no_bracketed_choice_reads_as_none(text: str | None) -> None:
    assert system.bracketed_choice(text) is None


def test_the_memory_facts_carry_swap_and_transparent_huge_pages(monkeypatch: pytest.MonkeyPatch) -> None:
    files = {
        "/proc/meminfo": data("meminfo_swap_593g_head.txt"),
        system.THP_ENABLED: "[always] madvise never\n",
    }
    monkeypatch.setattr(system, "read_text", files.get)
    sink = Sink()
    system.gather_memory(sink)
    assert sink.facts["memory"] == {
        "total_bytes": 593026380 * 1024,
        "available_bytes": 34258672 * 1024,
        "swap_total_bytes": 500106236 * 1024,
        "swap_free_bytes": 500106236 * 1024,
        "transparent_hugepage": "always",
    }


def cpufreq_tree(root: Path, governors: list[str], driver: str) -> Path:
    for index, governor in enumerate(governors):
        policy = root / f"cpu{index}" / "cpufreq"
        policy.mkdir(parents=True)
        (policy / "scaling_governor").write_text(governor + "\n")
        (policy / "scaling_driver").write_text(driver + "\n")
    (root / "cpuidle").mkdir()  # not a CPU
    (root / "cpu4").mkdir()  # an offline CPU: no cpufreq
    return root


def test_cpus_that_agree_report_their_one_governor_and_the_driver(tmp_path: Path) -> None:
    root = cpufreq_tree(tmp_path, ["performance"] * 4, "intel_pstate")
    assert system.cpufreq_facts(str(root)) == {"governor": "performance", "cpufreq_driver": "intel_pstate"}


def test_cpus_that_differ_report_each_governor_once(tmp_path: Path) -> None:
    root = cpufreq_tree(tmp_path, ["powersave", "performance", "powersave", "schedutil"], "intel_pstate")
    assert system.cpufreq_facts(str(root))["governor"] == "performance,powersave,schedutil"


def test_a_machine_without_cpufreq_reports_neither(tmp_path: Path) -> None:
    (tmp_path / "cpu0").mkdir()
    assert system.cpufreq_facts(str(tmp_path)) == {}


def test_dmi_of_a_server_is_read_and_its_serials_are_not(tmp_path: Path) -> None:
    root = sysfs_from_dump(data("dmi_supermicro_x10sri.txt"), tmp_path / "id")
    assert (root / "board_serial").exists()  # root could read it; the probe never asks
    assert system.dmi_facts(str(root)) == {
        "bios_vendor": "American Megatrends Inc.",
        "bios_version": "3.1",
        "bios_date": "06/06/2018",
        "board_vendor": "Supermicro",
        "board_name": "X10SRi-F",
        "product_name": "Super Server",
    }


def test_dmi_placeholders_are_kept_as_the_firmware_wrote_them(tmp_path: Path) -> None:
    root = sysfs_from_dump(data("dmi_gigabyte_c1037un.txt"), tmp_path / "id")
    found = system.dmi_facts(str(root))
    assert found["product_name"] == "To be filled by O.E.M."
    assert found["sys_vendor"] == "Gigabyte Technology Co., Ltd."
    assert found["bios_version"] == "FA"
    assert not any("serial" in name or "uuid" in name for name in found)


def test_dmi_values_lose_the_padding_firmware_leaves(tmp_path: Path) -> None:
    root = sysfs_from_dump(data("dmi_fujitsu_d2440_head.txt"), tmp_path / "id")
    assert system.dmi_facts(str(root))["bios_version"] == "4.06 R1.08.2440"


def test_no_dmi_is_unavailable_not_empty(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(system, "DMI", str(tmp_path / "none") + "/")
    sink = Sink()
    with pytest.raises(system.Unavailable, match="not readable"):
        system.gather_dmi(sink)
    assert "dmi" not in sink.facts


def test_the_dmi_view_keeps_only_text() -> None:
    node = NodeFacts({"dmi": {"bios_version": "3.1", "board_name": None, "product_name": 7}})
    assert node.dmi == {"bios_version": "3.1"}
    assert NodeFacts({"dmi": "garbage"}).dmi == {}


def test_the_kernel_modules_a_gpu_job_needs_read_from_a_real_proc_modules(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    text = data("proc_modules_talos_nvidia_510.txt")
    assert system.parse_modules(text) == {"nvidia_uvm", "nvidia_drm", "nvidia_modeset", "nvidia"}
    monkeypatch.setattr(system, "read_text", lambda path: text if path == "/proc/modules" else None)
    sink = Sink()
    system.gather_kernel_modules(sink)
    modules = sink.facts["kernel_modules"]
    assert set(modules) == set(system.KERNEL_MODULES)
    assert modules["nvidia"] == "loaded"
    assert "nvidia_uvm" not in modules  # loaded by the first CUDA program: says nothing of the node
    assert (modules["nvidia_peermem"], modules["nouveau"]) == ("not loaded", "not loaded")


def test_no_proc_modules_is_said_as_such(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(system, "read_text", lambda path: None)
    with pytest.raises(system.Unavailable, match="/proc/modules"):
        system.gather_kernel_modules(Sink())


def test_a_network_cards_error_counters_driver_and_link_changes(tmp_path: Path) -> None:
    """Laid out as /sys/class/net/IFACE is: statistics/ one number a file, carrier_changes, and the
    device's driver a link to /sys/bus/pci/drivers/NAME."""
    interface = tmp_path / "ens1f0np0"
    (interface / "statistics").mkdir(parents=True)
    for name, value in (("rx_errors", 0), ("rx_crc_errors", 12), ("rx_dropped", 3391), ("tx_errors", 0)):
        (interface / "statistics" / name).write_text(f"{value}\n")
    (interface / "carrier_changes").write_text("4\n")
    driver = tmp_path / "drivers" / "mlx5_core"
    driver.mkdir(parents=True)
    (interface / "device").mkdir()
    (interface / "device" / "driver").symlink_to(driver)
    assert card_counters(str(interface)) == {
        "driver": "mlx5_core",
        "statistics": {"rx_errors": 0, "tx_errors": 0, "rx_crc_errors": 12, "rx_dropped": 3391},
        "carrier_changes": 4,
    }
    assert card_counters(str(tmp_path / "gone")) == {}
