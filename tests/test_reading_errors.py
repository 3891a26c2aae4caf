"""A reading a tool answers with an error is a fault of that part: the probe keeps nvidia-smi's and
NVML's words (and the kernel's, for a sysfs file that fails with an I/O error) on the GPU, port or
PCI device, and the ``hardware`` check names the part with them. Real captures where they exist
(tests/data/hardware/reading_errors/SOURCES.md); "Not Supported" and "N/A" stay silent, as the
healthy H100 captures show."""

from __future__ import annotations

import copy
import errno
import json
import os
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pynvml
import pytest

from checks.gpu_memory import judge_gpu_memory
from checks.hardware import judge_hardware
from checks.hardware.reading_errors import answers, judge_reading_errors
from preflight.config import Config
from preflight.facts import GpuFacts, NodeFacts
from preflight.node import net, nvml, pcie_devices, smi, sysfs_counters
from tests.lab.gpu import GpuNode, write_infiniband

DATA = Path(__file__).parent / "data"
CAPTURES = DATA / "hardware" / "reading_errors"
H100_CSV = (DATA / "facts" / "smi_query_gpu_h100_590.48.01_idle.csv").read_text(encoding="utf-8")
H100 = smi.gpus_from_smi(H100_CSV, None, header=True)[0]
ERROR_ITEMS = {"gpu_unreadable", "gpu_reading_errors", "port_reading_errors", "pci_reading_errors"}


def capture(name: str) -> str:
    return (CAPTURES / name).read_text(encoding="utf-8")


def every_field_an_error(words: str) -> str:
    """The recorded H100 row with every field answered ``[words]`` (no public capture has one)."""
    header, row = [line for line in H100_CSV.splitlines() if line.strip()][:2]
    return f"{header}\n{', '.join([f'[{words}]'] * len(row.split(', ')))}\n"


def h100_rows(count: int, errors: dict[int, str] | None = None) -> str:
    """``count`` recorded H100 rows (with a header); the GPUs of ``errors`` answer every field with
    their words."""
    header, row = [line for line in H100_CSV.splitlines() if line.strip()][:2]
    lines = [header]
    for index in range(count):
        words = (errors or {}).get(index)
        lines.append(every_field_an_error(words).splitlines()[1] if words else row)
    return "\n".join(lines) + "\n"


def node(gpus: list[dict[str, Any]], **raw: Any) -> NodeFacts:
    facts: dict[str, Any] = {"gpus": gpus, "net": {"interfaces": [], "ib_devices": []}, **raw}
    facts.setdefault("hardware", {"nvswitches": 0, "xid": {"readable": True, "events": []}})
    return NodeFacts(facts)


def h100s(name: str, count: int = 4, **changes: dict[str, Any]) -> list[dict[str, Any]]:
    """``count`` recorded H100s, each with its index, serial and bus id; ``changes`` by index
    (``g3={...}``)."""
    gpus = []
    for index in range(count):
        gpu = copy.deepcopy(H100)
        gpu.update(
            index=index, serial=f"{name}{index}", pci_bus_id=f"00000000:{0x18 + 0x10 * index:02X}:00.0"
        )
        gpu.update(changes.get(f"g{index}", {}))
        gpus.append(gpu)
    return gpus


def items(results: list[Any]) -> list[tuple[str, str, tuple[str, ...]]]:
    return [(r.status, r.details.get("item"), r.hosts) for r in results if r.status != "pass"]


# ------------------------------------------------------------------ nvidia-smi's words


@pytest.mark.parametrize(
    ("raw", "words"),
    [
        ("[Unknown Error]", "Unknown Error"),
        ("[GPU is lost]", "GPU is lost"),
        ("[GPU requires reset]", "GPU requires reset"),
        ("[Insufficient Permissions]", "Insufficient Permissions"),
        ("[N/A]", None),
        ("N/A", None),
        ("[Not Supported]", None),
        ("Not Supported", None),
        ("[Requested functionality has been deprecated]", None),
        ("41", None),
        ("", None),
    ],
)
def test_a_bracketed_phrase_is_an_error_but_the_markers_of_a_missing_field(
    raw: str, words: str | None
) -> None:
    assert smi.smi_error(raw) == words


def test_the_recorded_unknown_error_is_read_in_its_words() -> None:
    (value,) = capture("smi_fan_speed_unknown_error.txt").splitlines()
    assert smi.smi_error(value) == "Unknown Error"
    assert smi.smi_value(value) is None


def test_one_field_answering_unknown_error_is_kept_on_its_gpu_fact() -> None:
    """A real GeForce RTX 2080 Ti whose power.default_limit answered [Unknown Error] beside good
    readings: the error is on ``power_default_limit_w``, the other readings as read."""
    (gpu,) = smi.gpus_from_smi(capture("smi_query_rtx2080ti_442.19_unknown_error.csv"), None, header=True)
    assert gpu["errors"] == {"power_default_limit_w": "Unknown Error"}
    assert (gpu["temperature_c"], gpu["power_w"], gpu["power_default_limit_w"]) == (56, 228.82, None)
    assert GpuFacts(gpu).errors == {"power_default_limit_w": "Unknown Error"} and not GpuFacts(gpu).unreadable


@pytest.mark.parametrize(
    "name",
    [
        "facts/smi_query_gpu_h100_590.48.01_idle.csv",
        "facts/smi_query_gpu_h100_590.48.01_load.csv",
        "facts/smi_query_gpu_rtx2080super_471.11_windows.csv",
    ],
)
def test_recorded_healthy_gpus_answer_no_error(name: str) -> None:
    """[N/A] (retired pages on Hopper, ECC on a consumer card) and [Requested functionality has been
    deprecated] (applications clocks) are fields a GPU does not have: no error."""
    text = (DATA / name).read_text(encoding="utf-8")
    assert "[N/A]" in text
    for gpu in smi.gpus_from_smi(text, None, header=True):
        assert "errors" not in gpu and GpuFacts(gpu).errors == {}


def test_every_field_the_probe_asks_for_is_read_into_a_gpu_fact() -> None:
    fields = [*smi.SMI_GPU_FIELDS, *(f for group in smi.SMI_HEALTH_GROUPS for f in group)]
    keys = set(smi.gpu_from_smi_row(dict.fromkeys(fields, "1")))
    assert {field: smi.smi_fact_key(field) for field in fields if smi.smi_fact_key(field) not in keys} == {}
    assert smi.smi_fact_key("fan.speed") is None  # not asked: its error is nobody's


def test_a_gpu_answering_every_field_with_an_error_keeps_its_place_and_reads_nothing() -> None:
    gpus = smi.gpus_from_smi(h100_rows(4, {3: "GPU is lost"}), None, header=True)
    lost = gpus[3]
    assert lost["index"] == 3  # its index is an error: its row's place
    assert set(lost["errors"].values()) == {"GPU is lost"}
    assert {"temperature_c", "memory_total_bytes", "ecc_mode", "remapped_rows", "pcie_link"} <= set(
        lost["errors"]
    )
    assert GpuFacts(lost).unreadable
    assert not any(GpuFacts(g).errors for g in gpus[:3])


def test_a_gpu_nvidia_smi_cannot_open_is_listed_with_its_words() -> None:
    (line,) = capture("smi_handle_gpu_is_lost.txt").splitlines()
    (found,) = smi._HANDLE_RE.finditer(line)
    lost = [(found.group(1), found.group(2).strip())]
    assert lost == [("0000:02:00.0", "GPU is lost. Reboot the system to recover this GPU")]
    # Beside a GPU that answered: one more GPU, at that bus id.
    gpus = smi.gpus_from_smi(h100_rows(1), None, header=True, lost=lost)
    assert gpus[1] == {
        "index": None,
        "pci_bus_id": "0000:02:00.0",
        "errors": {"handle": "GPU is lost. Reboot the system to recover this GPU"},
    }
    assert GpuFacts(gpus[1]).unreadable
    # With a row of errors for it: that row, which gets the bus id.
    gpus = smi.gpus_from_smi(h100_rows(2, {1: "Unknown Error"}), None, header=True, lost=lost)
    assert len(gpus) == 2 and gpus[1]["pci_bus_id"] == "0000:02:00.0" and gpus[1]["index"] == 1
    assert gpus[1]["errors"]["handle"].startswith("GPU is lost")


def _stand_in(tmp_path: Path, handle_line: str, rows: str) -> str:
    """An nvidia-smi that prints ``rows`` for any query and ``handle_line``, and exits 15 (GPU is
    lost, nvidia-smi's return codes)."""
    (tmp_path / "rows.txt").write_text(rows, encoding="utf-8")
    (tmp_path / "handle.txt").write_text(handle_line + "\n", encoding="utf-8")
    script = tmp_path / "nvidia-smi"
    script.write_text(
        f"#!/bin/sh\ncat {tmp_path}/rows.txt {tmp_path}/handle.txt\nexit 15\n", encoding="utf-8"
    )
    script.chmod(0o755)
    return str(script)


def test_an_nvidia_smi_failing_on_one_gpu_still_gives_the_others(tmp_path: Path) -> None:
    (line,) = capture("smi_handle_unknown_error.txt").splitlines()[1:]
    row = "0, NVIDIA H100 80GB HBM3, GPU-0, 00000000:18:00.0, 81559, 0, 81081, Enabled, 0, 0, 41, 69.85\n"
    gpus = smi.smi_gpus(_stand_in(tmp_path, line, row))
    assert [g["index"] for g in gpus] == [0, None]
    assert gpus[0]["temperature_c"] == 41 and "errors" not in gpus[0]
    assert gpus[1]["pci_bus_id"] == "0000:0B:00.0" and gpus[1]["errors"] == {"handle": "Unknown Error"}


def test_an_nvidia_smi_that_prints_no_gpu_row_is_still_a_reason(tmp_path: Path) -> None:
    (line,) = capture("smi_handle_unknown_error.txt").splitlines()[1:]
    with pytest.raises(smi.Unavailable, match="exited with status 15: Unable to determine the device handle"):
        smi.smi_gpus(_stand_in(tmp_path, line, ""))


# ------------------------------------------------------------------ NVML's words


def fake_nvml(devices: list[dict[str, Any]]) -> Any:
    """pynvml's calls over ``devices``: each answers its value, or raises the real pynvml exception
    given; a call a device does not list raises NVMLError_NotSupported."""

    def answer(key: str) -> Callable[..., Any]:
        def call(handle: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
            value = handle.get(key, handle.get("every"))
            if isinstance(value, BaseException):
                raise value
            if value is None:
                raise pynvml.NVMLError_NotSupported()
            return value

        return call

    def handle_by_index(index: int) -> dict[str, Any]:
        found = devices[index].get("handle")
        if isinstance(found, BaseException):
            raise found
        return devices[index]

    calls = {
        name: answer(key)
        for name, key in (
            ("nvmlDeviceGetName", "name"),
            ("nvmlDeviceGetUUID", "uuid"),
            ("nvmlDeviceGetSerial", "serial"),
            ("nvmlDeviceGetPciInfo", "pci"),
            ("nvmlDeviceGetMemoryInfo", "memory"),
            ("nvmlDeviceGetEccMode", "ecc"),
            ("nvmlDeviceGetTotalEccErrors", "ecc_count"),
            ("nvmlDeviceGetRemappedRows", "remapped"),
            ("nvmlDeviceGetArchitecture", "arch"),
            ("nvmlDeviceGetTemperature", "temperature"),
            ("nvmlDeviceGetPowerUsage", "power"),
            ("nvmlDeviceGetComputeRunningProcesses", "procs"),
            ("nvmlDeviceGetMigMode", "mig"),
            ("nvmlDeviceGetApplicationsClock", "clocks"),
            ("nvmlDeviceGetNvLinkState", "nvlink"),
            ("nvmlDeviceGetFieldValues", "fields"),
            ("nvmlDeviceGetPersistenceMode", "persistence"),
        )
    }
    return SimpleNamespace(
        NVMLError=pynvml.NVMLError,
        NVMLError_NotSupported=pynvml.NVMLError_NotSupported,
        NVML_NVLINK_MAX_LINKS=4,
        nvmlInit=lambda: None,
        nvmlShutdown=lambda: None,
        nvmlSystemGetDriverVersion=lambda: "580.159.04",
        nvmlSystemGetCudaDriverVersion_v2=lambda: 13000,
        nvmlDeviceGetCount=lambda: len(devices),
        nvmlDeviceGetHandleByIndex=handle_by_index,
        **calls,
    )


HEALTHY = {
    "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-1",
    "serial": "1654922005123",
    "pci": SimpleNamespace(busId="00000000:18:00.0"),
    "memory": SimpleNamespace(total=85520809984, used=0, free=85017493504),
    "ecc": (1, 1),
    "ecc_count": 0,
    "remapped": (0, 0, 0, 0),
    "arch": 9,
    "temperature": 31,
    "power": 70500,
    "procs": [],
    "mig": (0, 0),
}


def test_a_gpu_nvml_cannot_open_is_still_listed_with_nvmls_words() -> None:
    """pynvml's nvmlDeviceGetHandleByIndex raising NVMLError_GpuIsLost, as rossumai/nvgpu's
    traceback recorded it: the GPU stays on the node, its index with the words."""
    *_, last = capture("nvml_handle_gpu_is_lost.txt").splitlines()
    assert last == f"NVMLError_GpuIsLost: {pynvml.NVMLError_GpuIsLost()}"
    nv = fake_nvml([HEALTHY, {**HEALTHY, "handle": pynvml.NVMLError_GpuIsLost()}])
    _, gpus, problems = nvml.nvml_snapshot(nv)
    assert "errors" not in gpus[0]
    assert gpus[1] == {"index": 1, "errors": {"handle": "GPU is lost"}}
    assert problems["gpus[1]"] == "NVML: GPU is lost"


def test_every_call_answering_gpu_is_lost_leaves_a_gpu_that_reads_nothing() -> None:
    """A GPU fallen off the bus answers GPU_IS_LOST to every call (gpud's capture: its remapped
    rows); each fact it was to fill carries the words."""
    assert "ERROR_GPU_IS_LOST" in capture("gpud_remapped_rows_gpu_is_lost.txt")
    nv = fake_nvml([HEALTHY, {"every": pynvml.NVMLError_GpuIsLost()}])
    _, (healthy, lost), _ = nvml.nvml_snapshot(nv)
    assert "errors" not in healthy
    assert set(lost["errors"].values()) == {"GPU is lost"}
    expected = {"temperature_c", "power_w", "ecc_mode", "remapped_rows", "name", "serial", "link_errors"}
    assert expected | set(nvml.MEMORY_FACTS) <= set(lost["errors"])
    assert GpuFacts(lost).unreadable


def test_not_supported_deprecated_and_a_link_the_gpu_lacks_stay_silent() -> None:
    quiet = {
        **HEALTHY,
        "clocks": pynvml.NVMLError_Deprecated(),
        "nvlink": pynvml.NVMLError_InvalidArgument(),
        "fields": pynvml.NVMLError_NotSupported(),
    }
    _, (gpu,), problems = nvml.nvml_snapshot(fake_nvml([quiet]))
    assert "errors" not in gpu and not GpuFacts(gpu).unreadable
    assert problems == {}


def test_a_reset_and_a_permission_are_kept_in_nvmls_words() -> None:
    *_, last = capture("nvml_no_permission.txt").splitlines()
    assert str(pynvml.NVMLError_NoPermission()) in last
    devices = [
        {**HEALTHY, "temperature": pynvml.NVMLError_NoPermission()},
        {"every": pynvml.NVMLError_ResetRequired()},
    ]
    _, (denied, reset), _ = nvml.nvml_snapshot(fake_nvml(devices))
    assert denied["errors"] == {"temperature_c": "Insufficient Permissions"}
    assert set(reset["errors"].values()) == {"GPU requires restart"}  # pynvml's words for RESET_REQUIRED


# ------------------------------------------------------------------ sysfs reads that fail with EIO


def failing_reads(monkeypatch: pytest.MonkeyPatch, *endings: str) -> None:
    """Reads of the sysfs files whose path ends with one of ``endings`` fail with EIO."""

    def fake_open(path: str, *args: Any, **kwargs: Any) -> Any:
        if str(path).endswith(endings):
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(path))
        return open(path, *args, **kwargs)

    monkeypatch.setattr(sysfs_counters, "open", fake_open, raising=False)


def test_a_port_file_that_fails_with_an_io_error_is_named_and_a_missing_one_is_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write_infiniband(tmp_path, GpuNode(infiniband=True))
    failing_reads(monkeypatch, "mlx5_2/ports/1/state", "mlx5_2/ports/1/counters/symbol_error")
    ports = {p["name"]: p for p in net.ib_devices(str(tmp_path))}
    assert ports["mlx5_2"]["errors"] == {
        "state": "Input/output error",
        "counters/symbol_error": "Input/output error",
    }
    assert ports["mlx5_2"]["state"] is None and "symbol_error" not in ports["mlx5_2"]["counters"]
    # The lab's tree has no port_rcv_errors file: missing, silent.
    assert "errors" not in ports["mlx5_1"] and "port_rcv_errors" not in ports["mlx5_1"]["counters"]
    monkeypatch.undo()
    nodes = {
        "node1": node(h100s("a"), net={"interfaces": [], "ib_devices": [*ports.values()]}),
        "node2": node(h100s("b"), net={"interfaces": [], "ib_devices": net.ib_devices(str(tmp_path))}),
    }
    results = judge_hardware(nodes, Config())
    assert items(results) == [("fail", "port_reading_errors", ("node1",))]  # no ib_port_down beside it
    assert results[0].summary == (
        'node1: mlx5_2 port 1 answers "Input/output error" for state and symbol_error counter'
    )


def test_a_pci_device_file_that_fails_with_an_io_error_is_named_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for address, kind in (("0000:18:00.0", "0x030200"), ("0000:3b:00.0", "0x020700")):
        device = tmp_path / address
        device.mkdir()
        (device / "class").write_text(kind + "\n")
        (device / "vendor").write_text("0x10de\n" if kind.startswith("0x0302") else "0x15b3\n")
        (device / "numa_node").write_text("0\n")
        (device / "aer_dev_fatal").write_text("TOTAL_ERR_FATAL 0\n")
    failing_reads(monkeypatch, "aer_dev_fatal")
    devices = pcie_devices.pci_devices(str(tmp_path))
    assert [d.get("errors") for d in devices] == [{"aer_dev_fatal": "Input/output error"}] * 2
    # The NIC is named; the GPU's device is not where the GPU itself answers errors.
    gpus = h100s("a", 1, g0={"errors": {"temperature_c": "Unknown Error"}, "pci_bus_id": "00000000:18:00.0"})
    found = judge_reading_errors({"node1": node(gpus, pci_devices=devices)})
    assert [(r.details["item"], r.summary) for r in found] == [
        ("gpu_reading_errors", 'node1: GPU 0 (serial a0) answers "Unknown Error" for temperature'),
        ("pci_reading_errors", 'node1: NIC (0000:3b:00.0) answers "Input/output error" for fatal AER count'),
    ]


# ------------------------------------------------------------------ the judge


def test_a_gpu_with_some_readings_in_error_fails_in_the_tools_words() -> None:
    errors = {"temperature_c": "Unknown Error", "power_w": "Unknown Error", "ecc_mode": "Unknown Error"}
    nodes = {
        "node1": node(h100s("1")),
        "node2": node(h100s("165492200512", g3={"errors": errors, "temperature_c": None, "power_w": None})),
    }
    results = judge_hardware(nodes, Config())
    assert items(results) == [("fail", "gpu_reading_errors", ("node2",))]
    assert results[0].summary == (
        'node2: GPU 3 (serial 1654922005123) answers "Unknown Error" for temperature, power and ECC mode'
    )
    assert results[0].details["gpus"] == [3] and results[0].details["action"] == "drain"
    assert results[0].details["parts"] == [
        {"part": "GPU 3 (serial 1654922005123)", "gpu": 3, "errors": errors}
    ]


def test_words_are_grouped_and_each_reading_named_once() -> None:
    errors = {"memory_total_bytes": "Timeout", "memory_free_bytes": "Timeout", "power_w": "Unknown Error"}
    assert answers(errors) == 'answers "Timeout" for memory, "Unknown Error" for power'


def _unreadable(words: str) -> dict[str, NodeFacts]:
    gpus = smi.gpus_from_smi(h100_rows(4, {3: words}), None, header=True)
    for index, gpu in enumerate(gpus[:3]):
        gpu.update(index=index, serial=f"b{index}")
    return {"node1": node(h100s("a")), "node2": node(gpus)}


@pytest.mark.parametrize(
    ("words", "action", "advice"),
    [
        ("GPU is lost", "drain", "drain the node and reset or replace the GPU"),
        ("Unknown Error", "drain", "drain the node and reset or replace the GPU"),
        ("GPU requires reset", "reset_gpu", "reset it (nvidia-smi -r -i 3) before the run"),
        ("GPU requires restart", "reset_gpu", "reset it (nvidia-smi -r -i 3) before the run"),
    ],
)
def test_a_gpu_that_answers_only_errors_is_one_to_reset_or_drain(
    words: str, action: str, advice: str
) -> None:
    nodes = _unreadable(words)
    results = judge_hardware(nodes, Config())
    assert items(results) == [("fail", "gpu_unreadable", ("node2",))]
    assert results[0].summary == f'node2: GPU 3 answers "{words}" for every reading: {advice}'
    assert results[0].details["action"] == action and results[0].details["gpus"] == [3]


def test_a_gpu_that_could_not_be_opened_is_one_to_drain() -> None:
    gpus = [*h100s("b", 3), {"index": 3, "errors": {"handle": "GPU is lost"}}]
    (found,) = judge_reading_errors({"node2": node(gpus)})
    assert found.summary == (
        'node2: GPU 3 cannot be opened ("GPU is lost"): drain the node and reset or replace the GPU'
    )


def test_permissions_are_a_warning_about_the_probe_folded_across_nodes() -> None:
    denied = {"errors": {"temperature_c": "Insufficient Permissions"}, "temperature_c": None}
    nodes = {name: node(h100s(name, 1, g0=denied)) for name in ("node1", "node2")}
    results = judge_hardware(nodes, Config())
    assert items(results) == [("warn", "reading_permissions", ("node1", "node2"))]
    assert results[0].summary == (
        'node[1-2]: GPU 0 answers "Insufficient Permissions" for temperature: the probe\'s user may not '
        "read them (its rights, not a fault of the part)"
    )


def test_a_corrupted_inforom_nvml_found_is_left_to_the_versions_check() -> None:
    corrupt = {"errors": {"ecc_mode": "Corrupted infoROM"}, "inforom_valid": False}
    assert judge_reading_errors({"node1": node(h100s("a", 1, g0=corrupt))}) == []
    result = judge_hardware({"node1": node(h100s("a", 2, g0=corrupt))}, Config())[0]
    assert result.status == "pass" and result.summary.startswith(
        "1 node: 1 GPUs with their PCIe links at full width and none slowing itself down "
        "(1 more answering errors, named elsewhere)"
    )


def test_one_unreadable_gpu_is_one_finding_and_gpu_memory_does_not_call_it_free() -> None:
    nodes = _unreadable("Unknown Error")
    hardware = judge_hardware(nodes, Config())
    assert items(hardware) == [("fail", "gpu_unreadable", ("node2",))]
    memory = judge_gpu_memory(nodes, Config())
    assert items(memory) == []  # counted on its node, no "other model", no memory compared
    (passed,) = memory
    assert passed.summary.startswith("7 GPUs on 2 nodes (4 per node, NVIDIA H100 80GB HBM3 79.6 GiB)")
    assert passed.summary.endswith(
        "not judged: node2 GPU 3, whose memory readings are errors (the hardware check names them)"
    )


def test_a_gpu_nvml_could_not_open_is_counted_and_no_other_model() -> None:
    nodes = {
        "node1": node(h100s("a")),
        "node2": node([*h100s("b", 3), {"index": 3, "errors": {"handle": "GPU is lost"}}]),
        "node3": node(h100s("c")),
    }
    (passed,) = judge_gpu_memory(nodes, Config())
    assert passed.status == "pass" and "not judged: node2 GPU 3," in passed.summary
    assert items(judge_hardware(nodes, Config())) == [("fail", "gpu_unreadable", ("node2",))]


@pytest.mark.parametrize("source", ["nvml", "smi"])
def test_a_real_healthy_h100_answers_no_error(source: str) -> None:
    document = json.loads((DATA / "gpu_h100_580" / f"facts_{source}.json").read_text(encoding="utf-8"))
    found = NodeFacts(document["facts"])
    assert [g.errors for g in found.gpus or []] == [{}]
    assert judge_reading_errors({"h100": found}) == []
    assert not [r for r in judge_hardware({"h100": found}, Config()) if r.details.get("item") in ERROR_ITEMS]
