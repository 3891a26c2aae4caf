"""How ``versions`` presents itself: the version matrix (the compared facts and the drifting
packages by node group, odd values marked) and what to do about each kind of finding.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

from checks.versions.details import ExpectDetails, PackageDetails
from checks.versions.judge import ITEMS, NAME, NOT_INSTALLED, canonical_package, installed, lookup
from preflight.model import CheckResult, HostReport, RunReport
from preflight.nodeset import fold, minority
from preflight.view import Block, Presentation, Table, TCell, plain

# Node groups (columns) the matrix shows; the others are named in its note.
MAX_COLUMNS = 10

Row = tuple[str, str, dict[str, str]]  # (key, label, host -> value as shown)


def _statuses(results: Sequence[CheckResult]) -> tuple[dict[str, str], list[str]]:
    """The status of each row that a finding names (an item's name, ``pkg:<canonical name>``),
    and the packages the findings name, in their order."""
    status: dict[str, str] = {}
    packages: list[str] = []
    for r in results:
        item = str(r.details.get("item", ""))
        if item == "packages":
            drift = cast(PackageDetails, r.details)
            for name in drift.get("packages") or {}:
                packages.append(str(name))
                status[f"pkg:{canonical_package(str(name))}"] = r.status
        elif item == "expect" and cast(ExpectDetails, r.details).get("kind") == "package":
            name = str(cast(ExpectDetails, r.details).get("name"))
            packages.append(name)
            status[f"pkg:{canonical_package(name)}"] = r.status
        elif item:
            status[item] = r.status
    return status, packages


def _rows(hosts: Sequence[HostReport], packages: Sequence[str]) -> list[Row]:
    """Every compared fact some node reported, then every package a finding names."""
    rows: list[Row] = []
    for item in ITEMS:
        values = {h.name: lookup(h.node, item)[0] for h in hosts}
        if all(v is None for v in values.values()):
            continue
        shown = {h: "\u2014" if v is None else plain(v) for h, v in values.items()}
        rows.append((item.name, item.row, shown))
    listed = {h.name: installed(h.node) for h in hosts}
    for name in dict.fromkeys(packages):
        canonical = canonical_package(name)
        versions: dict[str, str] = {}
        for h in hosts:
            found = listed[h.name]
            if found is None:
                versions[h.name] = "(not listed)"
                continue
            versions[h.name] = plain(found[canonical][1]) if canonical in found else NOT_INSTALLED
        rows.append((f"pkg:{canonical}", plain(name), versions))
    return rows


def _agreeing_packages(hosts: Sequence[HostReport]) -> int:
    """Packages installed alike on every node (none when a node could not list them)."""
    listed = [installed(h.node) for h in hosts]
    if not listed or any(p is None for p in listed):
        return 0
    maps = [{k: version for k, (_, version) in p.items()} for p in listed if p is not None]
    first = maps[0]
    return sum(1 for k, v in first.items() if all(m.get(k) == v for m in maps[1:]))


def version_matrix(report: RunReport) -> Table | None:
    """Rows: versions and drifting packages; columns: nodes grouped by identical versions.
    A value that differs from its row's majority is highlighted, red where it fails the run."""
    hosts = [h for h in report.hosts if h.reachable]
    if not hosts:
        return None
    status, packages = _statuses(report.results_for(NAME))
    rows = _rows(hosts, packages)
    if not rows:
        return None
    majority = {key: minority(values)[0] for key, _, values in rows}
    # Drifting rows first: they are the reason to look at this table.
    rows.sort(key=lambda row: len(set(row[2].values())) == 1)
    groups: dict[tuple[str, ...], list[str]] = {}
    for h in hosts:
        groups.setdefault(tuple(values[h.name] for _, _, values in rows), []).append(h.name)
    columns = sorted(groups.items(), key=lambda item: -len(item[1]))
    hidden = columns[MAX_COLUMNS:]
    columns = columns[:MAX_COLUMNS]
    head = ["", *(f"{fold(names)} ({len(names)})" if len(names) > 1 else fold(names) for _, names in columns)]
    table_rows: list[list[TCell]] = []
    for i, (key, label, values) in enumerate(rows):
        drift = len(set(values.values())) > 1
        cells = [TCell(label, "row-label drift" if drift else "row-label")]
        for vector, names in columns:
            value = vector[i]
            css = "mono"
            title = ""
            if drift and (majority[key] is None or value != majority[key]):
                css += f" odd odd-{status.get(key, 'warn')}"
                title = f"{fold(names)}: {value}" + (
                    f" where the majority has {majority[key]}" if majority[key] is not None else ""
                )
            cells.append(TCell(value, css, title))
        table_rows.append(cells)
    agreeing = _agreeing_packages(hosts)
    notes = []
    if agreeing:
        notes.append(f"{agreeing} more packages agree on every node.")
    if hidden:
        notes.append(
            f"{len(hidden)} more groups of nodes are not shown: "
            + "; ".join(fold(names) for _, names in hidden[:5])
        )
    unreachable = [h.name for h in report.hosts if not h.reachable]
    if unreachable:
        notes.append(f"Not compared (not reachable): {fold(unreachable)}.")
    return Table(
        head=head,
        rows=table_rows,
        title="Versions by node group",
        note=" ".join(notes),
        css="versions",
    )


def _evidence(report: RunReport) -> list[Block]:
    table = version_matrix(report)
    return [] if table is None else [table]


_FLASH = (
    "Flash the named nodes' GPUs with the firmware the others run (nvflash, or the vendor's "
    "firmware bundle for the board), or reboot them where an update is pending; "
    "nvidia-smi --query-gpu=vbios_version,inforom.img --format=csv shows what each GPU runs."
)
_ADVICE = {
    "driver": "Install the majority's driver on the odd nodes (or drain them): ranks with "
    "different drivers can hang or crash inside NCCL.",
    "cuda": "Install the majority's driver on the odd nodes (or drain them).",
    "packages": "Rebuild the odd nodes' environment from the same image or lock file as the others.",
    "packages-other": "Not part of the training stack: harmless unless your code imports these "
    "packages; align the environments when convenient.",
    "expect": "Install the expected version, or change [expect] in the config.",
    "gpu_vbios": _FLASH,
    "gpu_inforom": _FLASH,
    "gpu_firmware": _FLASH,
    "gpu_firmware_mixed": "A GPU from another batch or left behind by a firmware update: flash it "
    "to match the node's other GPUs (nvflash, or the vendor's firmware bundle for the board), or "
    "have the vendor replace it.",
    "gpu_inforom_corrupt": "Drain the node: a corrupted InfoROM (nvidia-smi exits 14, DCGM's "
    "Inforom test fails) needs the vendor to reflash it or replace the GPU; give them its serial.",
    "*": "Make the odd nodes match the majority (same image, same lock file) before the run.",
}


def _advice(result: CheckResult) -> str:
    if result.status in ("pass", "skip"):
        return ""
    item = str(result.details.get("item") or "")
    if item == "packages" and cast(PackageDetails, result.details).get("stack") is False:
        item = "packages-other"
    return _ADVICE.get(item, _ADVICE["*"])


PRESENTATION = Presentation(
    heading="Versions",
    about="driver, CUDA, cuDNN, NCCL, Python, torch and packages agree across nodes",
    evidence=_evidence,
    advice=_advice,
)
