"""The NCCL each rank ran: found in the process's mappings, compared across nodes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from checks.allreduce.nccl_runtime import loaded_nccl_results, loaded_versions
from checks.job.node.nccl import loaded_nccl, nccl_libraries
from preflight.node.shared import decode_nccl_version

MAPS = Path(__file__).parent / "data" / "nccl" / "proc_maps_nccl_2.21.5.txt"


def test_the_nccl_library_is_found_in_a_recorded_process_map_and_look_alikes_are_not() -> None:
    maps = MAPS.read_text()
    assert nccl_libraries(maps) == ["/tmp/nccl/x/nvidia/nccl/lib/libnccl.so.2"]
    look_alikes = (
        "7f10a0000000-7f10a4000000 rw-s 00000000 00:1a 123 /dev/shm/nccl-Xy12ab\n"
        "7f10b0000000-7f10b0100000 r-xp 00000000 fe:00 456 "
        "/opt/hpcx/nccl_rdma_sharp_plugin/lib/libnccl-net.so\n"
        "7f10c0000000-7f10c0100000 r--p 00000000 00:00 0\n"
    )
    assert nccl_libraries(look_alikes + maps) == ["/tmp/nccl/x/nvidia/nccl/lib/libnccl.so.2"]


def test_nccl_version_codes_decode_in_both_encodings() -> None:
    assert decode_nccl_version(22105) == "2.21.5"  # what the recorded process's ncclGetVersion returned
    assert decode_nccl_version(21805) == "2.18.5"
    assert decode_nccl_version(2708) == "2.7.8"  # NCCL 2.8 and older: X*1000 + Y*100 + Z


@pytest.mark.parametrize(
    ("code", "version"),
    [
        (2804, "2.8.4"),  # the last release in the old encoding, X*1000 + Y*100 + Z
        (20906, "2.9.6"),  # 2.9 on: X*10000 + Y*100 + Z
        (20908, "2.9.8"),
        (21003, "2.10.3"),  # a two-digit minor: the reason for the new encoding
    ],
)
def test_nccl_version_codes_either_side_of_2_9_decode_as_released(code: int, version: str) -> None:
    assert decode_nccl_version(code) == version


class _TorchWithNcclInside:
    class cuda:
        class nccl:
            @staticmethod
            def version() -> tuple[int, int, int]:
                return (2, 20, 5)


def test_without_a_mapped_library_the_version_torch_was_built_with_is_said_to_be_that() -> None:
    found: dict[str, Any] = loaded_nccl(_TorchWithNcclInside())  # this process maps no libnccl
    assert found == {"version": "2.20.5", "library": None, "source": "torch build (NCCL linked into torch)"}


def _document(versions: list[str], per_node: int = 2) -> dict[str, Any]:
    ranks = [
        {"rank": node * per_node + local, "node_rank": node, "nccl_loaded": {"version": version}}
        for node, version in enumerate(versions)
        for local in range(per_node)
    ]
    return {"ranks": ranks}


def test_a_node_that_loaded_another_nccl_is_named_with_both_versions() -> None:
    names = ["gpu01", "gpu02", "gpu03"]
    versions = loaded_versions(_document(["2.21.5", "2.18.1", "2.21.5"]), names)
    (finding,) = loaded_nccl_results(versions)
    assert finding.status == "fail" and finding.hosts == ("gpu02",)
    assert "gpu02: 2.18.1" in finding.summary and "2.21.5" in finding.summary


def test_the_same_nccl_everywhere_is_no_finding_and_ranks_of_one_node_are_compared_too() -> None:
    names = ["gpu01", "gpu02"]
    assert loaded_nccl_results(loaded_versions(_document(["2.21.5", "2.21.5"]), names)) == []
    document = _document(["2.21.5", "2.21.5"])
    document["ranks"][3]["nccl_loaded"] = {"version": "2.19.3"}  # one rank of gpu02 differs
    (finding,) = loaded_nccl_results(loaded_versions(document, names))
    assert finding.hosts == ("gpu02",) and "2.19.3, 2.21.5" in finding.summary
