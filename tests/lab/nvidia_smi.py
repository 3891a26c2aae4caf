#!/usr/bin/env python3
"""A stand-in ``nvidia-smi`` that answers ``--query-gpu`` and ``--query-compute-apps`` from
recorded captures, as the real one does: any field the capture has (every field a current
driver offers, in the H100 capture of tests/data/facts), header and units as asked, and an
unknown field refused with the real message and exit status 2 ("Field "x" is not a valid
field to query."). Standard library only: it runs with a lab node's own Python.

Usage: nvidia_smi.py GPU_CAPTURE APPS_CAPTURE [nvidia-smi arguments...]
(each capture a ``--format=csv`` output with its header; a header alone: no GPU, no process).
Beside GPU_CAPTURE, ``nvlink --status`` prints ``nvlink-status.txt`` and ``nvlink -e`` (or
``--errorcounters``) prints ``nvlink-errors.txt``, each nothing where there is none (GPUs
without NVLink); ``-q -d PCIE`` prints ``query-pcie.txt``, and is refused where there is none.
"""

from __future__ import annotations

import csv
import os
import re
import sys

# Names nvidia-smi accepts for the same field (``--help-query-gpu``: "name" or "gpu_name"...).
ALIASES = {
    "gpu_name": "name",
    "gpu_uuid": "uuid",
    "gpu_bus_id": "pci.bus_id",
    "gpu_serial": "serial",
    "used_memory": "used_gpu_memory",
}
_UNIT_RE = re.compile(r"^(.*?) \[([^\]]+)\]$")


def read_capture(path: str) -> tuple[list[str], list[str], list[list[str]]]:
    """(field names, units, rows) of a ``--format=csv`` capture."""
    with open(path, encoding="utf-8", newline="") as handle:
        lines = [row for row in csv.reader(handle, skipinitialspace=True) if row]
    names, units = [], []
    for column in lines[0]:
        found = _UNIT_RE.match(column.strip())
        names.append(found.group(1) if found else column.strip())
        units.append(found.group(2) if found else "")
    return names, units, [[value.strip() for value in row] for row in lines[1:]]


def answer(capture: tuple[list[str], list[str], list[list[str]]], query: str, fmt: set[str]) -> str:
    names, units, rows = capture
    wanted = [field.strip() for field in query.split(",") if field.strip()]
    same = {**ALIASES, **{b: a for a, b in ALIASES.items()}}
    columns = []
    for field in wanted:
        name = next((n for n in (field, same.get(field)) if n in names), None)
        if name is None:
            raise LookupError(field)
        columns.append(names.index(name))
    out = []
    if "noheader" not in fmt:
        heads = []
        for field, column in zip(wanted, columns, strict=True):
            unit = units[column]
            heads.append(f"{field} [{unit}]" if unit and "nounits" not in fmt else field)
        out.append(", ".join(heads))
    for row in rows:
        values = []
        for column in columns:
            value = row[column]
            unit = units[column]
            if "nounits" in fmt and unit and value.endswith(" " + unit):
                value = value[: -len(unit) - 1]
            values.append(value)
        out.append(", ".join(values))
    return "\n".join(out) + "\n"


# The reports printed from a file beside GPU_CAPTURE, and whether one without its file prints
# nothing (GPUs without NVLink) rather than being refused.
REPORTS = {
    ("nvlink", "-s"): ("nvlink-status.txt", True),
    ("nvlink", "--status"): ("nvlink-status.txt", True),
    ("nvlink", "-e"): ("nvlink-errors.txt", True),
    ("nvlink", "--errorcounters"): ("nvlink-errors.txt", True),
    ("-q", "-d", "PCIE"): ("query-pcie.txt", False),
}


def report(gpu_path: str, args: list[str]) -> int | None:
    """Print the report ``args`` asks for; its exit status, or None where ``args`` asks for none."""
    if tuple(args) not in REPORTS:
        return None
    name, optional = REPORTS[tuple(args)]
    path = os.path.join(os.path.dirname(gpu_path), name)
    if not os.path.exists(path):
        return 0 if optional else 2
    with open(path, encoding="utf-8") as handle:
        sys.stdout.write(handle.read())
    return 0


def main(argv: list[str]) -> int:
    gpu_path, apps_path, *args = argv
    status = report(gpu_path, args)
    if status is not None:
        return status
    fmt: set[str] = set()
    query: tuple[str, str] | None = None
    for arg in args:
        if arg.startswith("--format="):
            fmt = set(arg.removeprefix("--format=").split(","))
        elif arg.startswith("--query-gpu="):
            query = (gpu_path, arg.removeprefix("--query-gpu="))
        elif arg.startswith("--query-compute-apps="):
            query = (apps_path, arg.removeprefix("--query-compute-apps="))
    if query is None or "csv" not in fmt:
        sys.stderr.write("this stand-in answers only --query-gpu / --query-compute-apps with --format=csv\n")
        return 2
    path, fields = query
    try:
        text = answer(read_capture(path), fields, fmt)
    except LookupError as missing:
        sys.stdout.write(f'Field "{missing.args[0]}" is not a valid field to query.\n\n')
        return 2
    sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
