"""The JSON contract of the ``versions`` check's details: a fact that differs between nodes, packages that
differ, an ``[expect]`` entry not met, GPU firmware that differs between like GPUs or a corrupted
InfoROM, or what every node agrees on (the pass).
"""

from __future__ import annotations

from typing import Literal, NotRequired, Required, TypedDict

Values = dict[str, list[str]]  # value -> the hosts that have it, largest group first


class ItemDrift(TypedDict):
    """A fact of :data:`ITEMS` that differs between nodes (``item`` is the fact's name)."""

    item: str
    label: str
    majority: str | None
    values: Values
    missing: NotRequired[dict[str, str]]  # host -> why the node did not report it


class PackageValues(TypedDict):
    majority: str | None
    values: Values


class PackageDetails(TypedDict, total=False):
    """``item: packages``: packages that differ between the same set of nodes, or (``missing``)
    nodes that could not list their packages."""

    item: Required[Literal["packages"]]
    stack: bool  # part of the training stack: fails the run
    packages: dict[str, PackageValues]  # by name as listed
    majority_hosts: list[str]
    missing: dict[str, str]


class ExpectDetails(TypedDict):
    """``item: expect``: an ``[expect]`` entry that is invalid, unknown or not met."""

    item: Literal["expect"]
    name: str
    wanted: str
    known_facts: NotRequired[list[str]]
    kind: NotRequired[Literal["fact", "package"]]
    values: NotRequired[Values]
    missing: NotRequired[dict[str, str]]
    notes: NotRequired[dict[str, str]]


class Agreement(TypedDict):
    """The pass (or a lone node's skip): what every node agrees on."""

    nodes: int
    versions: dict[str, str]  # item name -> the value every node has
    packages: NotRequired[int]  # how many packages were compared
    expectations_met: list[str]


FirmwareItem = Literal["gpu_vbios", "gpu_inforom", "gpu_firmware"]


class FirmwareValues(TypedDict):
    """One kind of GPU firmware on one model's nodes whose GPUs agree."""

    majority: str | None
    values: Values


class GpuFirmwareDrift(TypedDict):
    """``item: gpu_vbios | gpu_inforom | gpu_firmware``: nodes whose GPUs of one model run another
    VBIOS, InfoROM image or both than the same model's GPUs on the other nodes."""

    item: FirmwareItem
    model: str  # the GPUs' name
    firmware: dict[str, FirmwareValues]  # "vbios", "inforom": the kinds the named nodes differ in


class GpuFirmwareMixed(TypedDict):
    """``item: gpu_firmware_mixed``: one node whose GPUs of one model run different versions."""

    item: Literal["gpu_firmware_mixed"]
    model: str
    node: str
    gpus: dict[str, dict[str, list[int]]]  # "vbios", "inforom" -> version -> GPU indices


class CorruptGpu(TypedDict):
    index: int
    serial: str | None


class InforomCorrupt(TypedDict):
    """``item: gpu_inforom_corrupt``: GPUs of one node whose InfoROM NVML found corrupted."""

    item: Literal["gpu_inforom_corrupt"]
    node: str
    gpus: list[CorruptGpu]
    action: Literal["drain"]
