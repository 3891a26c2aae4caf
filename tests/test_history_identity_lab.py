"""One node in the history however it was reached: a full run reaches a lab node by its address, the
node's own prolog (``preflight check --local``, run on the node) finds it by its host name; the
store keeps one node, with both names that reached it, and the prolog compares with that full run.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.lab import NODE_PYTHON, MakeLab
from tests.test_check_lab import run_check

pytestmark = pytest.mark.lab

PREFLIGHT = str(Path(sys.executable).with_name("preflight"))


def test_a_node_reached_by_address_and_by_its_own_prolog_is_one_node(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(2)
    node = lab.nodes[1]
    # Outside /tmp: each lab node has a /tmp of its own.
    shared = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="pf-history-"))
    store = shared / "history.sqlite"
    config = shared / "preflight.toml"
    config.write_text(f'[history]\nstore = "{store}"\n')
    run, _ = run_check(lab, tmp_path, "--only", "versions,gpu_memory,limits", "--config", str(config))
    assert run.returncode == 0, run.stdout[-2000:]
    report = shared / "local.json"
    local = lab.exec(
        node,
        [
            PREFLIGHT,
            "check",
            "--local",
            "--python",
            NODE_PYTHON,
            "-q",
            "--config",
            str(config),
            "--json",
            str(report),
        ],
        timeout_s=120,
        check=False,
    )
    assert local.returncode == 0, local.stdout.decode()[-2000:] + local.stderr.decode()[-2000:]
    with sqlite3.connect(store) as db:
        rows = db.execute("SELECT node, reached_as FROM nodes ORDER BY run_id").fetchall()
    # The full run reached it by address, the prolog by its own name; both rows are the node.
    assert (node.name, node.address) in rows
    assert {name for name, reached in rows if reached != node.address and name == node.name} == {node.name}
    assert {name for name, _ in rows} == {n.name for n in lab.nodes}
    listed = subprocess.run(
        [PREFLIGHT, "history", "--runs", "--json", "--node", node.address, "--config", str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    runs = json.loads(listed.stdout)["runs"]
    assert len(runs) == 2
