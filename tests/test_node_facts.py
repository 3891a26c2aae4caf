"""The node facts probe: parsers on recorded outputs, gatherers on fakes, the real script."""

from __future__ import annotations

import csv
import io
import json
import os
import platform
import shutil
import socket
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from preflight.bundle import pack
from preflight.node import collect, gathering, masking, net, nvidia, nvml, shared, smi, stack, system

ROOT = Path(__file__).resolve().parents[1]
# What the controller sends a node to run the facts probe.
SCRIPT = pack("preflight.node.facts")
DATA = Path(__file__).resolve().parent / "data" / "facts"
LAB_SMI = ROOT / "tests" / "lab" / "nvidia_smi.py"
MIB = 1024 * 1024


def data(name: str) -> str:
    return (DATA / name).read_text(encoding="utf-8")


# ------------------------------------------------------------------ system files (this machine)


def test_os_release_pretty_name() -> None:
    release = system.parse_os_release(data("os-release.txt"))
    assert release["PRETTY_NAME"] == "Debian GNU/Linux 12 (bookworm)"
    assert release["ID"] == "debian"
    assert release["VERSION_ID"] == "12"


def test_os_release_quoting() -> None:
    text = '# comment\nNAME=\'Rocky Linux\'\nPRETTY_NAME="Ubuntu \\"22.04\\" LTS"\nID=ubuntu\n\n'
    release = system.parse_os_release(text)
    assert release == {"NAME": "Rocky Linux", "PRETTY_NAME": 'Ubuntu "22.04" LTS', "ID": "ubuntu"}


def test_meminfo_in_bytes() -> None:
    info = system.parse_meminfo(data("meminfo.txt"))
    assert info["MemTotal"] == 24683656 * 1024
    assert info["MemAvailable"] == 24209224 * 1024
    assert info["MemAvailable"] <= info["MemTotal"]
    # Counters without a unit are kept as they are.
    assert info["HugePages_Total"] == 0


def test_cpuinfo_model_name() -> None:
    assert system.parse_cpuinfo_model(data("cpuinfo.txt")) == "AMD EPYC"
    assert system.parse_cpuinfo_model("processor\t: 0\nBogoMIPS\t: 50.00\n") is None


def test_ip_addr_json_recorded() -> None:
    interfaces = net.parse_ip_addr_json(data("ip_addr_show.json"))
    assert [i["name"] for i in interfaces] == ["ifb0", "ifb1", "eth0"]  # lo left out
    eth0 = interfaces[2]
    assert eth0 == {
        "name": "eth0",
        "addresses": ["192.0.2.2/24", "fd00::2/64", "fe80::fc:ff:fe00:1/64"],
        "mtu": 1400,
        "state": "up",
        "mac": "02:fc:00:00:00:01",
    }
    assert interfaces[0]["addresses"] == []
    assert interfaces[0]["state"] == "down"


def test_link_speed() -> None:
    assert net.parse_link_speed("10000\n") == 10000
    assert net.parse_link_speed("-1\n") is None
    assert net.parse_link_speed("4294967295\n") is None
    assert net.parse_link_speed("") is None
    assert net.parse_link_speed(None) is None


# ------------------------------------------------------------------ driver, nvcc, versions


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("nvidia_version_proprietary_384.98.txt", "384.98"),
        ("nvidia_version_open_565.57.01.txt", "565.57.01"),
        ("nvidia_version_open_525.60.11.txt", "525.60.11"),
        ("nvidia_version_open_aarch64_35.3.1.txt", "35.3.1"),
    ],
)
def test_proc_driver_version(name: str, version: str) -> None:
    assert nvidia.parse_nvidia_driver_version(data(name)) == version


def test_proc_driver_version_garbage() -> None:
    assert nvidia.parse_nvidia_driver_version("") is None
    assert nvidia.parse_nvidia_driver_version("GCC version:  gcc version 12.2.0\n") is None


@pytest.mark.parametrize(
    ("name", "version"),
    [
        ("nvcc_version_13.0.txt", "13.0.88"),
        ("nvcc_version_11.5.txt", "11.5.119"),
        ("nvcc_version_11.1.txt", "11.1.105"),
        ("nvcc_version_11.0.txt", "11.0.221"),
        ("nvcc_version_10.1.txt", "10.1.243"),
    ],
)
def test_nvcc_version(name: str, version: str) -> None:
    assert stack.parse_nvcc_version(data(name)) == version


def test_nvcc_version_without_v_part() -> None:
    assert stack.parse_nvcc_version("Cuda compilation tools, release 12.4\n") == "12.4"
    assert stack.parse_nvcc_version("command not found") is None


def test_nccl_versions() -> None:
    assert shared.decode_nccl_version(22105) == "2.21.5"  # >= 2.9: X*10000 + Y*100 + Z
    assert shared.decode_nccl_version(21805) == "2.18.5"
    assert shared.decode_nccl_version(20901) == "2.9.1"
    assert shared.decode_nccl_version(2708) == "2.7.8"  # before 2.9: X*1000 + Y*100 + Z
    assert shared.format_nccl_version((2, 21, 5)) == "2.21.5"
    assert shared.format_nccl_version(2708) == "2.7.8"
    assert shared.format_nccl_version(None) is None


def test_cudnn_and_cuda_versions() -> None:
    assert shared.decode_cudnn_version(90100) == "9.1.0"
    assert shared.decode_cudnn_version(91002) == "9.10.2"
    assert shared.decode_cudnn_version(8902) == "8.9.2"
    assert shared.decode_cudnn_version(7605) == "7.6.5"
    assert shared.decode_cuda_version(12040) == "12.4"
    assert shared.decode_cuda_version(11080) == "11.8"
    assert shared.decode_cuda_version(13010) == "13.1"


def test_package_names_normalised() -> None:
    assert stack.normalize_package_name("Foo_Bar.baz--Qux") == "foo-bar-baz-qux"
    assert stack.normalize_package_name("nvidia_ml_py") == "nvidia-ml-py"


# ------------------------------------------------------------------ nvidia-smi outputs


def test_smi_h100_idle() -> None:
    gpus = smi.gpus_from_smi(
        data("smi_query_gpu_h100_590.48.01_idle.csv"),
        data("smi_compute_apps_h100_590.48.01_idle.csv"),
        header=True,
    )
    assert gpus == [
        {
            "index": 0,
            "name": "NVIDIA H100 80GB HBM3",
            "uuid": "GPU-00000000-0000-0000-0000-000000000000",
            "pci_bus_id": "00000000:00:09.0",
            "memory_total_bytes": 81559 * MIB,
            "memory_used_bytes": 0,
            "memory_free_bytes": 81081 * MIB,
            "ecc_mode": "enabled",
            "ecc_uncorrected_volatile": 0,
            "ecc_uncorrected_aggregate": 0,
            "remapped_rows": {
                "correctable": 0,
                "uncorrectable": 0,
                "pending": False,
                "failure": False,
            },
            "retired_pages_pending": None,  # [N/A] on Hopper: it remaps rows instead
            "mig_mode": "disabled",
            "processes": [],
            "temperature_c": 41,
            "power_w": 69.85,
            "serial": "0000000000000",
            "pcie_link": {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16},
            "persistence_mode": "enabled",
            "clock_event_reasons": 0x1,  # GPU idle
            "fabric": {"state": "completed", "status": "Success"},
            "nvlink": None,
            "link_errors": None,  # nvidia-smi's own reports, not its queries
            "power_limit_w": 700.0,
            "power_default_limit_w": 700.0,
            # "[Requested functionality has been deprecated]" on this driver.
            "clocks_applications_mhz": None,
            "clocks_default_applications_mhz": None,
            "ecc_mode_pending": "enabled",
            "mig_mode_pending": "disabled",
            "compute_mode": "default",
            "vbios_version": "96.00.A5.00.01",
            "inforom_image": "G520.0200.00.05",
            "inforom_valid": None,  # NVML's validation only
            "ecc_corrected_volatile": 0,
            "ecc_corrected_aggregate": 0,
            "clocks_max_mhz": {"sm": 1980, "memory": 2619},
            "power_max_limit_w": 700.0,
            "memory_temperature_c": 48,
        }
    ]


def test_smi_h100_under_load_with_processes() -> None:
    (gpu,) = smi.gpus_from_smi(
        data("smi_query_gpu_h100_590.48.01_load.csv"),
        data("smi_compute_apps_h100_590.48.01_load.csv"),
        header=True,
    )
    assert gpu["memory_used_bytes"] == 19818 * MIB
    assert gpu["memory_free_bytes"] == 61263 * MIB
    assert gpu["temperature_c"] == 59
    assert gpu["power_w"] == 631.95
    assert gpu["processes"] == [
        {"pid": 11327, "used_memory_bytes": 2566 * MIB, "name": "/root/tools/memhog"},
        {"pid": 11328, "used_memory_bytes": 1542 * MIB, "name": "/root/tools/memhog"},
        {"pid": 11345, "used_memory_bytes": 15690 * MIB, "name": "./gpu_burn"},
    ]


def test_smi_consumer_card_without_ecc() -> None:
    (gpu,) = smi.gpus_from_smi(data("smi_query_gpu_rtx2080super_471.11_windows.csv"), None, header=True)
    assert gpu["name"] == "NVIDIA GeForce RTX 2080 SUPER"
    assert gpu["uuid"] == "GPU-df6e7a7c-7314-46f8-abc4-b88b36dcf3aa"
    assert gpu["pci_bus_id"] == "00000000:0C:00.0"
    assert gpu["memory_total_bytes"] == 8192 * MIB
    assert gpu["ecc_mode"] is None
    assert gpu["ecc_uncorrected_volatile"] is None
    assert gpu["ecc_uncorrected_aggregate"] is None
    assert gpu["remapped_rows"] is None  # this driver has no remapped_rows fields
    assert gpu["retired_pages_pending"] is None
    assert gpu["temperature_c"] == 36
    assert gpu["power_w"] == 32.7


# The --query-gpu list of the recorded smi_noheader_rtx2080_440.64.txt (see SOURCES.md).
RTX2080_QUERY = (
    "power.limit,power.min_limit,power.max_limit,memory.total,vbios_version,driver_version,"
    "name,gpu_uuid,power.draw,temperature.gpu,temperature.memory,clocks.current.graphics,"
    "clocks.sm,clocks.mem,utilization.gpu,utilization.memory,fan.speed,"
    "pcie.link.width.current,pstate"
)


def test_smi_noheader_with_bare_na() -> None:
    fields = RTX2080_QUERY.split(",")
    (row,) = smi.parse_smi_csv(data("smi_noheader_rtx2080_440.64.txt"), fields)
    assert row["name"] == "GeForce RTX 2080"
    assert row["gpu_uuid"] == "GPU-22b2c6ac-2d49-4863-197c-9c469071178a"
    assert smi.smi_number(row["power.draw"]) == 176.98
    assert smi.smi_number(row["memory.total"]) == 7979
    assert smi.smi_value(row["temperature.memory"]) is None  # "N/A"
    assert smi.smi_value(row["pstate"]) == "P2"


@pytest.mark.parametrize("name", ["smi_noheader_na_new.txt", "smi_noheader_na_old.txt"])
def test_smi_unsupported_markers(name: str) -> None:
    fields = [
        "memory.total",
        "memory.free",
        "memory.used",
        "temperature.gpu",
        "fan.speed",
        "utilization.gpu",
        "utilization.memory",
    ]
    (row,) = smi.parse_smi_csv(data(name), fields)
    assert smi.smi_number(row["memory.total"]) == 2004
    assert smi.smi_number(row["fan.speed"]) is None  # [N/A] or [Not Supported]
    assert smi.smi_number(row["temperature.gpu"]) == 44


def test_smi_noheader_in_probe_field_order() -> None:
    # What the probe's own nvidia-smi fallback query returns (noheader,nounits).
    line = (
        "0, NVIDIA H100 80GB HBM3, GPU-00000000-0000-0000-0000-000000000000, 00000000:00:09.0, "
        "81559, 19818, 61263, Enabled, 0, 0, 59, 631.95"
    )
    apps = "GPU-00000000-0000-0000-0000-000000000000, 11345, 15690, ./gpu_burn, extra args\n"
    (gpu,) = smi.gpus_from_smi(line + "\n", apps)
    assert gpu["memory_total_bytes"] == 81559 * MIB
    assert gpu["ecc_mode"] == "enabled"
    assert gpu["remapped_rows"] is None
    # A process name with a comma in it is put back together.
    assert gpu["processes"] == [
        {"pid": 11345, "used_memory_bytes": 15690 * MIB, "name": "./gpu_burn, extra args"}
    ]


def test_smi_short_rows_are_skipped() -> None:
    assert smi.parse_smi_csv("1, 2\n", ["a", "b", "c"]) == []
    assert smi.parse_smi_csv("", None) == []


# ------------------------------------------------------------------ masking


def test_mask_env_by_name() -> None:
    env = {
        "HF_TOKEN": "hf_abcdef",
        "WANDB_API_KEY": "0123456789",
        "db_password": "hunter2",
        "MY_PASSWD": "x",
        "AWS_SECRET_ACCESS_KEY": "y",
        "GCP_CREDENTIALS": "z",
        "PROXY_AUTH": "basic",
        "NCCL_DEBUG": "INFO",
        "CUDA_VISIBLE_DEVICES": "0,1",
        "MASTER_ADDR": "10.0.0.11",
        "LD_LIBRARY_PATH": "/usr/local/cuda/lib64:/opt/lib",
    }
    masked = masking.mask_env(env)
    for name in (
        "HF_TOKEN",
        "WANDB_API_KEY",
        "db_password",
        "MY_PASSWD",
        "AWS_SECRET_ACCESS_KEY",
        "GCP_CREDENTIALS",
        "PROXY_AUTH",
    ):
        assert masked[name] == "***", name
    for name in ("NCCL_DEBUG", "CUDA_VISIBLE_DEVICES", "MASTER_ADDR", "LD_LIBRARY_PATH"):
        assert masked[name] == env[name], name
    assert env["HF_TOKEN"] == "hf_abcdef"  # the input is left alone


def test_mask_env_url_credentials() -> None:
    env = {
        "TORCH_HOME_URL": "https://alice:s3cr3t@mirror.example:8443/torch",
        "PYTORCH_INDEX": "https://ghp_abc123@github.com/org/repo.git",
        "NCCL_URLS": "http://u1:p1@h1:1,http://u2:p2@h2:2/x",
        "TORCH_PLAIN_URL": "http://mirror.example:8080/path?q=1",
        "NCCL_EMAIL": "ops@example.com",
    }
    masked = masking.mask_env(env)
    assert masked["TORCH_HOME_URL"] == "https://alice:***@mirror.example:8443/torch"
    assert masked["PYTORCH_INDEX"] == "https://***@github.com/org/repo.git"
    assert masked["NCCL_URLS"] == "http://u1:***@h1:1,http://u2:***@h2:2/x"
    assert masked["TORCH_PLAIN_URL"] == env["TORCH_PLAIN_URL"]
    assert masked["NCCL_EMAIL"] == "ops@example.com"
    for value in masked.values():
        assert "s3cr3t" not in value and "ghp_abc123" not in value
        assert "p1" not in value and "p2" not in value


def test_select_env() -> None:
    environ = {
        "NCCL_IB_HCA": "mlx5",
        "CUDA_HOME": "/usr/local/cuda",
        "GLOO_SOCKET_IFNAME": "eth0",
        "TORCH_DISTRIBUTED_DEBUG": "DETAIL",
        "PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True",
        "MASTER_PORT": "29500",
        "WORLD_SIZE": "16",
        "OMP_NUM_THREADS": "8",
        "HOME": "/root",
        "PATH": "/usr/bin",
        "MY_NCCL_THING": "no",
    }
    assert list(stack.select_env(environ)) == [
        "CUDA_HOME",
        "GLOO_SOCKET_IFNAME",
        "MASTER_PORT",
        "NCCL_IB_HCA",
        "OMP_NUM_THREADS",
        "PYTORCH_CUDA_ALLOC_CONF",
        "TORCH_DISTRIBUTED_DEBUG",
        "WORLD_SIZE",
    ]


def test_scrub_masks_urls_everywhere() -> None:
    doc = {"a": ["x", {"b": "git+https://u:pw@host/r"}], "n": 3, "none": None}
    assert masking.scrub(doc) == {"a": ["x", {"b": "git+https://u:***@host/r"}], "n": 3, "none": None}


def test_scrub_masks_secret_named_env_entries_at_any_depth() -> None:
    """The controller applies this same function again (preflight.redact): an ``env`` anywhere in what
    a node sent is masked by name, whatever put it there."""
    doc = {"jobs": ({"env": {"HF_TOKEN": "hf_x", "MIRROR": "https://u:pw@host/", "N": 3}},)}
    masked = {"HF_TOKEN": "***", "MIRROR": "https://u:***@host/", "N": 3}
    assert masking.scrub(doc) == {"jobs": [{"env": masked}]}


def test_collect_masks_secret_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NCCL_SECRET_THING", "do-not-leak")
    monkeypatch.setenv("TORCH_MIRROR", "https://bob:do-not-leak@mirror.example/")
    monkeypatch.setattr(collect, "_gatherers", lambda: [(("env",), stack.gather_env)])
    document = collect.collect()
    assert "do-not-leak" not in json.dumps(document)
    assert document["facts"]["env"]["NCCL_SECRET_THING"] == "***"


# ------------------------------------------------------------------ collect and gatherers


def test_one_failing_gatherer_does_not_stop_the_others(monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(sink: gathering.Sink) -> None:
        raise RuntimeError("boom")

    def unavailable(sink: gathering.Sink) -> None:
        raise gathering.Unavailable("nvcc not found on PATH")

    monkeypatch.setattr(
        collect,
        "_gatherers",
        lambda: [
            (("memory",), boom),
            (("nvcc",), unavailable),
            (("hostname",), system.gather_hostname),
        ],
    )
    document = collect.collect()
    assert document["probe_version"] == 1
    assert document["facts"]["hostname"] == socket.gethostname()
    assert document["facts"]["unavailable"] == {
        "memory": "memory gatherer failed: RuntimeError: boom",
        "nvcc": "nvcc not found on PATH",
    }


def test_packages_first_on_sys_path_wins(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for folder, version in (("first", "1.0"), ("second", "2.0")):
        info = tmp_path / folder / f"Foo_Bar-{version}.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text(
            f"Metadata-Version: 2.1\nName: Foo_Bar\nVersion: {version}\n", encoding="utf-8"
        )
    monkeypatch.setattr(sys, "path", [str(tmp_path / "first"), str(tmp_path / "second")])
    sink = gathering.Sink()
    stack.gather_packages(sink)
    assert sink.facts["packages"] == {"foo-bar": "1.0"}


def test_packages_are_read_as_importlib_reads_them(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the head of each METADATA is read: the same names and versions as importlib's full
    reading, for every distribution installed here, and for metadata whose description (after
    the blank line) holds Name: and Version: lines of its own, or that is an egg's PKG-INFO."""
    sink = gathering.Sink()
    stack.gather_packages(sink)
    expected: dict[str, str] = {}
    for dist in metadata.distributions():
        expected.setdefault(stack.normalize_package_name(dist.metadata["Name"]), dist.version)
    assert sink.facts["packages"] == expected and len(expected) > 10

    wheel = tmp_path / "site" / "tricky-3.1.dist-info"
    wheel.mkdir(parents=True)
    (wheel / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: tricky\nSummary: a: b\nVersion: 3.1\n"
        "Description-Content-Type: text/markdown\n\nName: wrong\nVersion: 9.9\n",
        encoding="utf-8",
    )
    egg = tmp_path / "site" / "old_style.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text(
        "Metadata-Version: 1.0\nName: old_style\nVersion: 0.4\nDescription: one\n        Version: 8\n",
        encoding="utf-8",
    )
    monkeypatch.setattr(sys, "path", [str(tmp_path / "site")])
    sink = gathering.Sink()
    stack.gather_packages(sink)
    assert sink.facts["packages"] == {"old-style": "0.4", "tricky": "3.1"}


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def test_ib_devices_from_sysfs(tmp_path: Path) -> None:
    port = tmp_path / "mlx5_0" / "ports" / "1"
    _write(port / "state", "4: ACTIVE\n")
    _write(port / "rate", "400 Gb/sec (4X NDR)\n")
    _write(port / "link_layer", "InfiniBand\n")
    _write(tmp_path / "mlx5_0" / "hca_type", "MT4129\n")
    _write(tmp_path / "mlx5_0" / "fw_ver", "28.41.1000\n")
    down = tmp_path / "mlx5_1" / "ports" / "1"
    _write(down / "state", "1: DOWN\n")
    _write(down / "rate", "10 Gb/sec (4X SDR)\n")
    _write(down / "link_layer", "Ethernet\n")
    # mlx5_1 is an SR-IOV virtual function: its PCI device links to its physical function.
    (tmp_path / "mlx5_1" / "device").mkdir()
    (tmp_path / "mlx5_1" / "device" / "physfn").symlink_to(tmp_path / "mlx5_0")
    assert net.ib_devices(str(tmp_path)) == [
        {
            "name": "mlx5_0",
            "port": 1,
            "state": "ACTIVE",
            "rate": "400 Gb/sec (4X NDR)",
            "link_layer": "InfiniBand",
            "phys_state": None,
            "counters": {},
            "pcie": None,
            "width": "4X",
            "hca_type": "MT4129",
            "fw_ver": "28.41.1000",
            "virtual": False,
        },
        {
            "name": "mlx5_1",
            "port": 1,
            "state": "DOWN",
            "rate": "10 Gb/sec (4X SDR)",
            "link_layer": "Ethernet",
            "phys_state": None,
            "counters": {},
            "pcie": None,
            "width": "4X",
            "virtual": True,
        },
    ]
    assert net.ib_devices(str(tmp_path / "missing")) == []


def test_net_without_ip_reads_sysfs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    net_root = tmp_path / "net"
    for name, mtu, state, speed in (
        ("eth0", "9000", "up", "100000"),
        ("lo", "65536", "unknown", None),
        ("veth1", "1500", "down", "-1"),
    ):
        _write(net_root / name / "mtu", mtu + "\n")
        _write(net_root / name / "operstate", state + "\n")
        if speed is not None:
            _write(net_root / name / "speed", speed + "\n")
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    monkeypatch.setattr(net, "IP_FALLBACK_PATHS", ())
    assert net.net_facts(str(net_root), str(tmp_path / "no-ib")) == {
        "interfaces": [
            {"name": "eth0", "addresses": [], "mtu": 9000, "state": "up", "speed_mbps": 100000, "pcie": None},
            {
                "name": "veth1",
                "addresses": [],
                "mtu": 1500,
                "state": "down",
                "speed_mbps": None,
                "pcie": None,
            },
        ],
        "ib_devices": [],
    }


# ------------------------------------------------------------------ NVML through a fake pynvml


class FakeNVMLError(Exception):
    pass


class FakeNotSupported(FakeNVMLError):
    def __str__(self) -> str:
        return "Not Supported"


class FakeUnknownError(FakeNVMLError):
    def __str__(self) -> str:
        return "Unknown Error"


def fake_pynvml(*, init_error: Exception | None = None) -> Any:
    """Two GPUs: a Hopper with a process, and a Volta with one failing sensor."""
    hopper = {
        "name": b"NVIDIA H100 80GB HBM3",  # older pynvml returns bytes
        "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "bus": "00000000:18:00.0",
        "arch": 9,
        "memory": SimpleNamespace(total=85520809984, used=553648128, free=84967161856),
        "ecc": [1, 1],
        # By (error type, counter): uncorrected 0 volatile and 2 aggregate, corrected 5 and 37.
        "ecc_counts": {(1, 0): 0, (1, 1): 2, (0, 0): 5, (0, 1): 37},
        "max_clocks": {1: 1980, 2: 2619},
        "power_limits": (200000, 700000),
        "remapped": (0, 1, 1, 0),
        "temperature": 31,
        "power": 70500,
        "procs": [SimpleNamespace(pid=1234, usedGpuMemory=1048576000)],
        "mig": (0, 0),
        # nvmlDeviceGetFieldValues: PCIe replays, NVLink CRC flit, CRC data and replay errors;
        # the recovery count (59) answered NOT_SUPPORTED.
        "fields": {94: 3, 38: 0, 45: 0, 52: 12, 82: 38},  # 82: the memory's temperature
    }
    volta = {
        "name": "Tesla V100-SXM2-16GB",
        "uuid": "GPU-66666666-7777-8888-9999-000000000000",
        "bus": b"00000000:86:00.0",
        "arch": 5,
        "memory": SimpleNamespace(total=17179869184, used=0, free=17179869184),
        "ecc": [0, 0],
        "ecc_counts": None,
        "max_clocks": {1: 1530, 2: 877},
        "power_limits": (150000, 300000),
        "remapped": None,
        "temperature": 40,
        "power": FakeUnknownError(),
        "procs": [],
        "mig": None,  # MIG came with Ampere
        "fields": FakeNotSupported(),
    }
    devices = [hopper, volta]
    calls: list[str] = []

    def value(key: str) -> Any:
        def get(handle: dict[str, Any], *args: Any) -> Any:
            result = handle[key]
            if isinstance(result, Exception):
                raise result
            if result is None:
                raise FakeNotSupported()
            return result

        return get

    def ecc_errors(handle: dict[str, Any], error_type: int, counter: int) -> int:
        if handle["ecc_counts"] is None:
            raise FakeNotSupported()
        return int(handle["ecc_counts"][(error_type, counter)])

    def field_values(handle: dict[str, Any], ids: list[int]) -> list[SimpleNamespace]:
        fields = handle["fields"]
        if isinstance(fields, Exception):
            raise fields
        return [  # valueType 3: unsigned long long; nvmlReturn 3: NVML_ERROR_NOT_SUPPORTED
            SimpleNamespace(
                valueType=3,
                nvmlReturn=0 if i in fields else 3,
                value=SimpleNamespace(ullVal=fields.get(i, 0)),
            )
            for i in ids
        ]

    def init() -> None:
        calls.append("init")
        if init_error is not None:
            raise init_error

    return SimpleNamespace(
        calls=calls,
        NVMLError=FakeNVMLError,
        NVMLError_NotSupported=FakeNotSupported,
        NVML_MEMORY_ERROR_TYPE_UNCORRECTED=1,
        NVML_MEMORY_ERROR_TYPE_CORRECTED=0,
        NVML_VOLATILE_ECC=0,
        NVML_AGGREGATE_ECC=1,
        NVML_TEMPERATURE_GPU=0,
        NVML_DEVICE_ARCH_AMPERE=7,
        nvmlInit=init,
        nvmlShutdown=lambda: calls.append("shutdown"),
        nvmlSystemGetDriverVersion=lambda: "550.54.15",
        nvmlSystemGetCudaDriverVersion_v2=lambda: 12040,
        nvmlDeviceGetCount=lambda: len(devices),
        nvmlDeviceGetHandleByIndex=lambda i: devices[i],
        nvmlDeviceGetName=value("name"),
        nvmlDeviceGetUUID=value("uuid"),
        nvmlDeviceGetPciInfo=lambda h: SimpleNamespace(busId=h["bus"]),
        nvmlDeviceGetMemoryInfo=value("memory"),
        nvmlDeviceGetEccMode=value("ecc"),
        nvmlDeviceGetTotalEccErrors=ecc_errors,
        nvmlDeviceGetRemappedRows=value("remapped"),
        nvmlDeviceGetArchitecture=value("arch"),
        nvmlDeviceGetRetiredPagesPendingStatus=lambda h: 1,
        nvmlDeviceGetTemperature=value("temperature"),
        nvmlDeviceGetPowerUsage=value("power"),
        nvmlDeviceGetComputeRunningProcesses=value("procs"),
        nvmlDeviceGetMigMode=value("mig"),
        nvmlSystemGetProcessName=lambda pid: b"python",
        nvmlDeviceGetFieldValues=field_values,
        nvmlDeviceGetMaxClockInfo=lambda h, clock: h["max_clocks"][clock],
        nvmlDeviceGetPowerManagementLimitConstraints=value("power_limits"),
    )


def test_nvml_snapshot() -> None:
    nv = fake_pynvml()
    driver, gpus, problems = nvml.nvml_snapshot(nv)
    assert driver == {"version": "550.54.15", "cuda": "12.4", "source": "nvml"}
    hopper, volta = gpus
    assert hopper == {
        "index": 0,
        "name": "NVIDIA H100 80GB HBM3",
        "uuid": "GPU-11111111-2222-3333-4444-555555555555",
        "pci_bus_id": "00000000:18:00.0",
        "memory_total_bytes": 85520809984,
        "memory_used_bytes": 553648128,
        "memory_free_bytes": 84967161856,
        "ecc_mode": "enabled",
        "ecc_uncorrected_volatile": 0,
        "ecc_uncorrected_aggregate": 2,
        "remapped_rows": {"correctable": 0, "uncorrectable": 1, "pending": True, "failure": False},
        "retired_pages_pending": None,  # Ampere and later: not asked
        "mig_mode": "disabled",
        "processes": [{"pid": 1234, "used_memory_bytes": 1048576000, "name": "python"}],
        "temperature_c": 31,
        "power_w": 70.5,
        # Not offered by this fake NVML: read as unknown, no problem noted.
        "serial": None,
        "pcie_link": None,
        "persistence_mode": None,
        "clock_event_reasons": None,
        "fabric": None,
        "nvlink": None,
        "power_limit_w": None,
        "power_default_limit_w": None,
        "clocks_applications_mhz": None,
        "clocks_default_applications_mhz": None,
        "ecc_mode_pending": "enabled",
        "mig_mode_pending": "disabled",
        "compute_mode": None,
        "vbios_version": None,
        "inforom_image": None,
        "inforom_valid": None,
        "ecc_corrected_volatile": 5,
        "ecc_corrected_aggregate": 37,
        "clocks_max_mhz": {"sm": 1980, "memory": 2619},
        "power_max_limit_w": 700.0,
        "memory_temperature_c": 38,
        "link_errors": {
            "pcie_replays": 3,
            "nvlink_crc_flit": 0,
            "nvlink_crc_data": 0,
            "nvlink_replay": 12,
            "nvlink_recovery": None,
        },
    }
    assert volta["link_errors"] is None  # field values not supported: nothing read
    assert volta["memory_temperature_c"] is None
    assert (volta["ecc_corrected_volatile"], volta["ecc_corrected_aggregate"]) == (None, None)
    assert (volta["clocks_max_mhz"], volta["power_max_limit_w"]) == ({"sm": 1530, "memory": 877}, 300.0)
    assert volta["pci_bus_id"] == "00000000:86:00.0"
    assert volta["ecc_mode"] == "disabled"
    assert volta["ecc_uncorrected_volatile"] is None  # NotSupported -> null
    assert volta["remapped_rows"] is None
    assert volta["retired_pages_pending"] is True  # pre-Ampere: page retirement
    assert volta["power_w"] is None
    assert volta["mig_mode"] is None
    assert problems == {"gpus[1].power_w": "NVML: Unknown Error"}
    assert nv.calls == ["init", "shutdown"]


@pytest.mark.parametrize(
    ("state", "status", "expected"),
    [
        (3, 0, {"state": "completed", "status": "Success"}),
        (2, 0, {"state": "in_progress", "status": "Success"}),
        (1, 0, {"state": "not_started", "status": "Success"}),
        (3, 999, {"state": "completed", "status": "Unknown Error"}),
        (0, 0, None),  # NVML_GPU_FABRIC_STATE_NOT_SUPPORTED: no fabric to register with
    ],
)
def test_nvml_fabric_registration(state: int, status: int, expected: Any) -> None:
    """nvmlDeviceGetGpuFabricInfo fills the struct of the real pynvml; a GPU without the probe
    (the Volta here) has no fabric fact and no problem."""
    import pynvml

    def fabric_info(handle: dict[str, Any], ref: Any) -> int:
        if handle["arch"] < 9:
            raise FakeNotSupported()
        info = ref._obj  # the structure behind ctypes.byref
        info.state, info.status = state, status
        return 0

    nv = fake_pynvml()
    nv.c_nvmlGpuFabricInfo_t = pynvml.c_nvmlGpuFabricInfo_t
    nv.nvmlDeviceGetGpuFabricInfo = fabric_info
    nv.nvmlErrorString = lambda code: {999: "Unknown Error"}[code]
    _, (hopper, volta), problems = nvml.nvml_snapshot(nv)
    assert hopper["fabric"] == expected
    assert volta["fabric"] is None
    assert "gpus[0].fabric" not in problems and "gpus[1].fabric" not in problems


@pytest.mark.parametrize(
    ("state", "status", "expected"),
    [
        ("Completed", "Success", {"state": "completed", "status": "Success"}),
        ("In Progress", "N/A", {"state": "in_progress", "status": None}),
        ("N/A", "N/A", None),  # A100 systems: the driver does not probe the fabric
        ("[Not Supported]", "[Not Supported]", None),
    ],
)
def test_smi_fabric_registration(state: str, status: str, expected: Any) -> None:
    row = {"index": "0", "uuid": "GPU-1", "fabric.state": state, "fabric.status": status}
    assert smi.gpu_from_smi_row(row)["fabric"] == expected


def test_a_failed_nvml_process_query_is_not_reported_rather_than_no_process() -> None:
    nv = fake_pynvml()
    nv.nvmlDeviceGetComputeRunningProcesses = lambda handle: (_ for _ in ()).throw(FakeUnknownError())
    _, (hopper, volta), problems = nvml.nvml_snapshot(nv)
    assert hopper["processes"] is None and volta["processes"] is None
    assert problems["gpus[0].processes"] == "NVML: Unknown Error"


def test_nvml_init_failure_is_a_reason() -> None:
    nv = fake_pynvml(init_error=FakeNVMLError("Driver Not Loaded"))
    with pytest.raises(gathering.Unavailable, match="NVML: Driver Not Loaded"):
        nvml.nvml_snapshot(nv)
    assert nv.calls == ["init"]


# An idle H100 80GB HBM3 on driver 580.159.04 (tests/data/gpu_h100_580): nvidia-smi -q's "FB Memory
# Usage" says Total 81559 MiB, Reserved 480 MiB, Used 0 MiB, Free 81079 MiB; NVML's version 1 said
# used 480 MiB (facts_nvml.json), counting the driver's reservation as used.
H100_580_TOTAL = 85520809984  # 81559 MiB
H100_580_RESERVED = 480 * MIB
H100_580_FREE = 85017493504  # 81079 MiB


def h100_580_memory(*, driver_has_v2: bool = True) -> tuple[Any, list[Any]]:
    """``nvmlDeviceGetMemoryInfo`` as the real pynvml has it (``version`` picks the call), with
    the figures of that machine; and the versions it was asked for."""
    asked: list[Any] = []

    def memory_info(handle: dict[str, Any], version: Any = None) -> Any:
        asked.append(version)
        if not version:
            used = H100_580_RESERVED
            return SimpleNamespace(total=H100_580_TOTAL, free=H100_580_TOTAL - used, used=used)
        if not driver_has_v2:
            raise FakeNVMLError("Function Not Found")
        return SimpleNamespace(
            version=version, total=H100_580_TOTAL, reserved=H100_580_RESERVED, free=H100_580_FREE, used=0
        )

    return memory_info, asked


def test_nvml_memory_is_asked_in_version_2_leaving_the_driver_reservation_out_of_used() -> None:
    import pynvml

    nv = fake_pynvml()
    nv.nvmlMemory_v2 = pynvml.nvmlMemory_v2
    nv.nvmlDeviceGetMemoryInfo, asked = h100_580_memory()
    _, (hopper, _), problems = nvml.nvml_snapshot(nv)
    assert asked == [pynvml.nvmlMemory_v2] * 2
    memory = {key: hopper[f"memory_{key}_bytes"] for key in ("total", "used", "free")}
    assert memory == {"total": H100_580_TOTAL, "used": 0, "free": H100_580_FREE}
    # As the nvidia-smi path read the same GPU on the same machine.
    (from_smi,) = json.loads((ROOT / "tests/data/gpu_h100_580/facts_smi.json").read_text())["facts"]["gpus"]
    assert memory == {key: from_smi[f"memory_{key}_bytes"] for key in ("total", "used", "free")}
    assert not [label for label in problems if label.endswith(".memory")]


@pytest.mark.parametrize("why", ["pynvml_without_v2", "driver_without_v2", "pynvml_without_version_argument"])
def test_nvml_memory_falls_back_to_version_1(why: str) -> None:
    """An older pynvml (no ``nvmlMemory_v2``, or no ``version`` argument) or a driver without
    ``nvmlDeviceGetMemoryInfo_v2``: version 1, as facts_nvml.json recorded it, and no problem."""
    import pynvml

    nv = fake_pynvml()
    memory_info, asked = h100_580_memory(driver_has_v2=why != "driver_without_v2")
    nv.nvmlDeviceGetMemoryInfo = memory_info
    if why != "pynvml_without_v2":
        nv.nvmlMemory_v2 = pynvml.nvmlMemory_v2
    if why == "pynvml_without_version_argument":
        nv.nvmlDeviceGetMemoryInfo = lambda handle: memory_info(handle)
    _, (hopper, _), problems = nvml.nvml_snapshot(nv)
    assert asked[-1] is None
    assert (hopper["memory_total_bytes"], hopper["memory_used_bytes"], hopper["memory_free_bytes"]) == (
        H100_580_TOTAL,
        H100_580_RESERVED,
        H100_580_FREE,
    )
    (recorded,) = json.loads((ROOT / "tests/data/gpu_h100_580/facts_nvml.json").read_text())["facts"]["gpus"]
    assert hopper["memory_used_bytes"] == recorded["memory_used_bytes"] == 503316480
    assert not [label for label in problems if label.endswith(".memory")]


def test_gather_nvidia_through_nvml(monkeypatch: pytest.MonkeyPatch) -> None:
    nv = fake_pynvml()
    monkeypatch.setitem(sys.modules, "pynvml", nv)
    sink = gathering.Sink()
    nvidia.gather_nvidia(sink)
    assert sink.facts["driver"]["source"] == "nvml"
    assert len(sink.facts["gpus"]) == 2
    assert sink.unavailable == {"gpus[1].power_w": "NVML: Unknown Error"}


def test_gather_nvidia_without_pynvml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The stand-in nvidia-smi of the lab's GPU nodes, serving the whole recorded H100 capture.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    smi_path = bin_dir / "nvidia-smi"
    smi_path.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" "{LAB_SMI}" "{DATA / "smi_query_gpu_h100_590.48.01_load.csv"}" '
        f'"{DATA / "smi_compute_apps_h100_590.48.01_load.csv"}" "$@"\n',
        encoding="utf-8",
    )
    smi_path.chmod(0o755)
    proc_version = tmp_path / "version"
    proc_version.write_text(data("nvidia_version_open_565.57.01.txt"), encoding="utf-8")
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}/usr/bin{os.pathsep}/bin")
    monkeypatch.setattr(nvidia, "PROC_DRIVER_VERSION", str(proc_version))

    sink = gathering.Sink()
    nvidia.gather_nvidia(sink)
    assert sink.unavailable == {}
    assert sink.facts["driver"]["version"] == "565.57.01"
    assert sink.facts["driver"]["source"] == "proc"
    (gpu,) = sink.facts["gpus"]
    expected = smi.gpus_from_smi(
        data("smi_query_gpu_h100_590.48.01_load.csv"),
        data("smi_compute_apps_h100_590.48.01_load.csv"),
        header=True,
    )[0]
    # Everything the full capture says, remapped rows and MIG mode included.
    assert gpu == expected
    assert gpu["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}


def _stand_in_smi(tmp_path: Path, gpu_capture: Path, apps_capture: Path) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    smi_path = bin_dir / "nvidia-smi"
    smi_path.write_text(
        f'#!/bin/sh\nexec "{sys.executable}" "{LAB_SMI}" "{gpu_capture}" "{apps_capture}" "$@"\n',
        encoding="utf-8",
    )
    smi_path.chmod(0o755)
    return smi_path


def test_the_stand_in_refuses_an_unknown_field_as_nvidia_smi_does(tmp_path: Path) -> None:
    smi_path = _stand_in_smi(
        tmp_path,
        DATA / "smi_query_gpu_h100_590.48.01_idle.csv",
        DATA / "smi_compute_apps_h100_590.48.01_idle.csv",
    )
    refused = subprocess.run(
        [smi_path, "--query-gpu=uuid,device_minor", "--format=csv,noheader"], capture_output=True, text=True
    )
    assert (refused.returncode, refused.stdout) == (
        2,
        'Field "device_minor" is not a valid field to query.\n\n',
    )
    served = subprocess.run(
        [smi_path, "--query-gpu=memory.total,remapped_rows.pending", "--format=csv"],
        capture_output=True,
        text=True,
    )
    assert served.stdout == "memory.total [MiB], remapped_rows.pending\n81559 MiB, No\n"


def test_an_older_nvidia_smi_without_row_remapping_still_answers_the_other_health_fields(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The recorded capture without its remapped_rows.* columns, as a pre-Ampere driver knows them.
    rows = list(csv.reader(io.StringIO(data("smi_query_gpu_h100_590.48.01_idle.csv")), skipinitialspace=True))
    keep = [i for i, name in enumerate(rows[0]) if not name.startswith("remapped_rows.")]
    older = tmp_path / "older.csv"
    older.write_text(
        "\n".join(", ".join(row[i] for i in keep) for row in rows if row) + "\n", encoding="utf-8"
    )
    smi_path = _stand_in_smi(tmp_path, older, DATA / "smi_compute_apps_h100_590.48.01_idle.csv")
    (gpu,) = smi.smi_gpus(str(smi_path))
    assert gpu["remapped_rows"] is None  # not asked of a driver that does not know it
    assert gpu["mig_mode"] == "disabled"  # the other groups still answered
    assert gpu["processes"] == []


def test_nvlink_status_recorded_with_two_links_down() -> None:
    assert smi.nvlinks_from_smi(data("smi_nvlink_status_v100_inactive.txt")) == {
        3: {"active": 4, "inactive": [3, 5]}
    }


def test_nvlink_status_recorded_with_every_link_down() -> None:
    """nvidia-smi lists no link of a GPU whose links are all down: it says so instead."""
    assert smi.nvlinks_from_smi(data("smi_nvlink_status_b200_all_inactive.txt")) == {
        2: {"active": 0, "inactive": [], "all_inactive": True}
    }


def test_nvlink_status_of_a_gpu_without_nvlink_gives_nothing() -> None:
    text = "GPU 0: NVIDIA L4 (UUID: GPU-0)\nGPU 1: NVIDIA L4 (UUID: GPU-1)\n"
    assert smi.nvlinks_from_smi(text) == {}
    assert smi.nvlinks_from_smi("") == {}


def test_nvlink_status_is_merged_by_gpu_index(tmp_path: Path) -> None:
    """Through the lab's stand-in: the status printed beside the capture lands on its GPU; the
    query fields are untouched."""
    capture = tmp_path / "query-gpu.csv"
    capture.write_text(data("smi_query_gpu_h100_590.48.01_idle.csv"), encoding="utf-8")
    links = "".join(f"\t Link {k}: {'<inactive>' if k == 7 else '26.562 GB/s'}\n" for k in range(18))
    (tmp_path / "nvlink-status.txt").write_text(f"GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-0)\n{links}")
    smi_path = _stand_in_smi(tmp_path, capture, DATA / "smi_compute_apps_h100_590.48.01_idle.csv")
    (gpu,) = smi.smi_gpus(str(smi_path))
    assert gpu["nvlink"] == {"active": 17, "inactive": [7]}
    assert gpu["pcie_link"] == {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16}


def test_nvml_nvlink_states() -> None:
    """Every link NVML can name is asked; a link the GPU lacks answers an error and is left out,
    and a GPU without NVLink (NotSupported) has no NVLink fact and no problem."""
    asked: list[int] = []

    def state(handle: dict[str, Any], link: int) -> int:
        if handle["arch"] < 9:
            raise FakeNotSupported()
        asked.append(link)
        if link >= 12:
            raise FakeNVMLError("Invalid Argument")  # a 12-link GPU
        return 0 if link in (2, 9) else 1

    nv = fake_pynvml()
    nv.NVML_NVLINK_MAX_LINKS = 18
    nv.NVML_FEATURE_ENABLED = 1
    nv.nvmlDeviceGetNvLinkState = state
    _, (hopper, volta), problems = nvml.nvml_snapshot(nv)
    assert hopper["nvlink"] == {"active": 10, "inactive": [2, 9]}
    assert asked == list(range(18))
    assert volta["nvlink"] is None
    assert problems == {"gpus[1].power_w": "NVML: Unknown Error"}


def test_gather_nvidia_no_driver_at_all(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pynvml", None)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(nvidia, "PROC_DRIVER_VERSION", str(tmp_path / "missing"))
    sink = gathering.Sink()
    nvidia.gather_nvidia(sink)
    assert "driver" not in sink.facts and "gpus" not in sink.facts
    assert sink.unavailable["driver"].startswith("no NVIDIA driver: ")
    assert "pynvml not importable" in sink.unavailable["driver"]
    assert sink.unavailable["gpus"] == sink.unavailable["driver"]


# ------------------------------------------------------------------ torch through a fake module


def fake_torch(*, nccl: Any = (2, 21, 5), cudnn: int | None = 90100) -> Any:
    return SimpleNamespace(
        __version__="2.5.1+cu124",
        version=SimpleNamespace(cuda="12.4", hip=None),
        backends=SimpleNamespace(cudnn=SimpleNamespace(version=lambda: cudnn)),
        cuda=SimpleNamespace(
            is_available=lambda: True,
            device_count=lambda: 8,
            nccl=SimpleNamespace(version=lambda: nccl),
        ),
        distributed=SimpleNamespace(
            is_available=lambda: True,
            is_nccl_available=lambda: True,
            is_gloo_available=lambda: True,
        ),
    )


def test_torch_facts_cuda_build() -> None:
    assert stack.torch_facts(fake_torch()) == {
        "version": "2.5.1+cu124",
        "cuda": "12.4",
        "cudnn": "9.1.0",
        "nccl": "2.21.5",
        "cuda_available": True,
        "device_count": 8,
        "distributed_available": True,
        "nccl_available": True,
        "gloo_available": True,
    }


def test_torch_facts_old_int_nccl_and_cudnn8() -> None:
    got = stack.torch_facts(fake_torch(nccl=2708, cudnn=8902))
    assert (got["nccl"], got["cudnn"]) == ("2.7.8", "8.9.2")


# ------------------------------------------------------------------ the real script


def run_probe(argv: list[str], env: dict[str, str] | None = None) -> tuple[dict[str, Any], float]:
    """Run the facts bundle as the controller does (stdin of `python -`); one JSON document or fail."""
    started = time.monotonic()
    proc = subprocess.run(
        [*argv, "-"],
        input=SCRIPT,
        capture_output=True,
        timeout=120,
        env=env,
        check=False,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    out = proc.stdout.decode("utf-8")
    assert out.endswith("\n") and out.count("\n") == 1, out[:2000]
    document = json.loads(out)
    assert document["probe_version"] == 1
    assert set(document) == {"probe_version", "facts"}
    return document, elapsed


def _check_common(found: dict[str, Any]) -> None:
    assert found["hostname"] == socket.gethostname()
    assert found["os"]["kernel"] == platform.release()
    assert found["cpu"]["count"] == os.cpu_count()
    assert found["memory"]["total_bytes"] > 0
    assert isinstance(found["unavailable"], dict)
    if os.path.exists("/proc/driver/nvidia/version"):
        assert "driver" in found
    else:
        assert "driver" not in found and "gpus" not in found
        assert found["unavailable"]["driver"].startswith("no NVIDIA driver")
        assert found["unavailable"]["gpus"]


def test_script_with_this_python() -> None:
    document, elapsed = run_probe([sys.executable])
    found = document["facts"]
    _check_common(found)
    assert found["python"]["version"] == platform.python_version()
    assert found["python"]["executable"] == sys.executable
    assert found["packages"]["pytest"] == metadata.version("pytest")
    try:
        torch_version = metadata.version("torch")
    except metadata.PackageNotFoundError:
        assert found["unavailable"]["torch"].startswith("torch not importable")
    else:
        assert found["torch"]["version"] == torch_version
        assert found["packages"]["torch"] == torch_version
    try:
        metadata.version("nvidia-ml-py")
    except metadata.PackageNotFoundError:
        pass
    else:
        if not os.path.exists("/proc/driver/nvidia/version"):
            assert "NVML" in found["unavailable"]["gpus"]
    assert elapsed < 60


def test_script_isolated_without_site_packages() -> None:
    document, _ = run_probe([sys.executable, "-I", "-S"])
    found = document["facts"]
    _check_common(found)
    assert "torch" not in found
    assert found["unavailable"]["torch"] == "torch not importable: No module named 'torch'"


def _runnable(candidates: list[str]) -> str | None:
    for candidate in candidates:
        path = shutil.which(candidate)
        if path is None:
            continue
        check = subprocess.run([path, "-c", "pass"], capture_output=True, check=False)
        if check.returncode == 0:
            return path
    return None


def _python38_candidates() -> list[str]:
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    return ["python3.8", *(str(p) for p in sorted(pyenv.glob("3.8*/bin/python3.8")))]


@pytest.mark.parametrize("which", ["oldest supported (3.8)", "system"])
def test_script_with_other_interpreters(which: str) -> None:
    """No torch, maybe no pynvml, and on 3.8 the oldest syntax and library the probe allows."""
    candidates = _python38_candidates() if which.startswith("oldest") else ["/usr/bin/python3"]
    path = _runnable(candidates)
    if path is None:
        pytest.skip(f"no {which} interpreter here")
    document, _ = run_probe([path, "-I"])
    found = document["facts"]
    _check_common(found)
    assert ("torch" in found) != ("torch" in found["unavailable"])
    if which.startswith("oldest"):
        assert found["python"]["version"].startswith("3.8.")


def fake_torch_package(tmp_path: Path, extra: str = "") -> dict[str, str]:
    """A torch on PYTHONPATH that prints, from Python and straight to fd 1, while it is imported
    (and runs ``extra`` too); the environment that finds it."""
    package = tmp_path / "torch"
    package.mkdir()
    (package / "__init__.py").write_text(
        "import os, sys, types\n"
        "print('noise from python')\n"
        "os.write(1, b'noise from C\\n')\n"
        "__version__ = '9.9.9+fake'\n"
        "version = types.SimpleNamespace(cuda=None, hip=None)\n"
        "backends = types.SimpleNamespace(cudnn=types.SimpleNamespace(version=lambda: None))\n"
        "cuda = types.SimpleNamespace(is_available=lambda: False, device_count=lambda: 0)\n"
        "distributed = types.SimpleNamespace(is_available=lambda: False)\n" + extra,
        encoding="utf-8",
    )
    return dict(os.environ, PYTHONPATH=str(tmp_path))


def test_script_keeps_stray_output_off_stdout(tmp_path: Path) -> None:
    document, _ = run_probe([sys.executable, "-S"], env=fake_torch_package(tmp_path))
    assert document["facts"]["torch"] == {
        "version": "9.9.9+fake",
        "cuda": None,
        "cudnn": None,
        "nccl": None,
        "cuda_available": False,
        "device_count": 0,
        "distributed_available": False,
        "nccl_available": False,
        "gloo_available": False,
    }


def test_script_ends_without_tearing_torch_down(tmp_path: Path) -> None:
    """Tearing down an interpreter that has torch loaded takes about half a second of CPU: once its
    document is out, the probe ends at once, and what was written to stderr still arrives."""
    torn_down = tmp_path / "torn-down"
    env = fake_torch_package(
        tmp_path,
        "import atexit\n"
        f"atexit.register(lambda: open({str(torn_down)!r}, 'w').close())\n"
        "sys.stderr.write('a warning without its newline')\n",
    )
    proc = subprocess.run(
        [sys.executable, "-S", "-"], input=SCRIPT, capture_output=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr.decode(errors="replace")
    assert json.loads(proc.stdout)["facts"]["torch"]["version"] == "9.9.9+fake"
    assert b"a warning without its newline" in proc.stderr
    assert not torn_down.exists()


def test_script_masks_secrets_in_env() -> None:
    env = dict(
        os.environ,
        NCCL_IB_TOKEN_FILE="tok-do-not-leak",
        TORCH_MIRROR="https://bob:pw-do-not-leak@mirror.example/simple",
        NCCL_DEBUG="INFO",
    )
    document, _ = run_probe([sys.executable, "-I", "-S"], env=env)
    assert "do-not-leak" not in json.dumps(document)
    found_env = document["facts"]["env"]
    assert found_env["NCCL_IB_TOKEN_FILE"] == "***"
    assert found_env["TORCH_MIRROR"] == "https://bob:***@mirror.example/simple"
    assert found_env["NCCL_DEBUG"] == "INFO"


def test_the_system_nccl_is_read_in_a_child_so_torch_still_loads_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A libnccl.so.2 on the loader's path (a stand-in built here, reporting 2.21.5): the probe
    reads its version, and the probe's own process never maps it, so the torch it imports
    afterwards gets its bundled NCCL, as the real job does."""
    source = tmp_path / "nccl.c"
    source.write_text("int ncclGetVersion(int *version) { *version = 22105; return 0; }\n", encoding="utf-8")
    library = tmp_path / "libnccl.so.2"
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(library), str(source)], check=True)
    monkeypatch.setenv("LD_LIBRARY_PATH", str(tmp_path))
    sink = gathering.Sink()
    stack.gather_system_libraries(sink)
    assert sink.facts["nccl_system"] == "2.21.5"
    assert "cudnn_system" in sink.unavailable
    assert str(library) not in Path("/proc/self/maps").read_text(encoding="utf-8")


def test_system_library_answers_decode_or_say_why() -> None:
    found, reasons = stack.system_libraries(
        '{"nccl_system": [21903, null], "cudnn_system": [null, "libcudnn.so.9 not loadable: not found"]}'
    )
    assert found == {"nccl_system": "2.19.3"}
    assert reasons == {"cudnn_system": "libcudnn.so.9 not loadable: not found"}
