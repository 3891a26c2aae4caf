"""A fabric manager for lab nodes made GPU nodes (tests/lab/gpu.py, whose /usr/local/sbin comes first
on the node's PATH and whose /proc/driver is the node's own): NVSwitches under
/proc/driver/nvidia-nvswitch/devices, and stand-ins for ``systemctl`` (the unit's state, as
``systemctl show`` prints it), ``nv-fabricmanager`` (its version, as the recorded B300's prints it)
and ``journalctl`` (the unit's journal: lines of real captures, tests/data/hardware/fabric_manager;
any other journal is the machine's own). The node has no fabric manager's log file, so the probe
reads the journal.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

DATA = Path(__file__).resolve().parents[1] / "data" / "hardware" / "fabric_manager"
RECORDED_VERSION = DATA / "nv_fabricmanager_version_b300.txt"
RECORDED_VERSION_NUMBER = "610.57.04"


@dataclass(frozen=True)
class FabricManagerNode:
    """What the node's fabric manager says: its unit's properties (``{"ActiveState": "failed",
    ...}``), its version, its journal's text, and the NVSwitches the node has."""

    unit: Mapping[str, str]
    version: str
    journal: str
    nvswitches: int = 4


def _stand_in(path: Path, script: str) -> None:
    path.write_text("#!/bin/sh\n" + script, encoding="utf-8")
    path.chmod(0o755)


def install(root: Path, fm: FabricManagerNode) -> list[str]:
    """Write the node's stand-ins under ``root``; the shell commands that put them in the node, to
    run after tests/lab/gpu.py's ``install``."""
    root.mkdir(parents=True, exist_ok=True)
    q = shlex.quote
    shown = "".join(f"{name}={value}\n" for name, value in fm.unit.items())
    (root / "unit.txt").write_text(shown, encoding="utf-8")
    version = RECORDED_VERSION.read_text(encoding="utf-8").replace(RECORDED_VERSION_NUMBER, fm.version)
    (root / "version.txt").write_text(version, encoding="utf-8")
    (root / "journal.txt").write_text(fm.journal, encoding="utf-8")
    _stand_in(root / "systemctl", f'[ "$1" = show ] && exec cat {q(str(root / "unit.txt"))}\nexit 1\n')
    _stand_in(root / "nv-fabricmanager", f"exec cat {q(str(root / 'version.txt'))}\n")
    _stand_in(
        root / "journalctl",
        f'case " $* " in *" -u nvidia-fabricmanager "*) exec cat {q(str(root / "journal.txt"))};; esac\n'
        'exec /usr/bin/journalctl "$@"\n',
    )
    switches = [
        f"/proc/driver/nvidia-nvswitch/devices/0000:{0x05 + i:02x}:00.0" for i in range(fm.nvswitches)
    ]
    return [
        *(
            f"cp {q(str(root / name))} /usr/local/sbin/{name}"
            for name in ("systemctl", "nv-fabricmanager", "journalctl")
        ),
        *(f"mkdir -p {path}" for path in switches),
    ]
