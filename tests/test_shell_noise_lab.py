"""A node whose login shell prints on stdout passes the whole check, named in a note.

Root's shell on the lab's nodes is bash, which runs ``~/.bashrc`` for ``ssh host command`` too.
Node 2's prints what ``~/.cargo/env`` printed when sourced from ``~/.bashrc`` in
rust-lang/rustup#498, the report of a machine that could no longer be an rsync target ("protocol
version mismatch -- is your shell clean?"), and a line on stderr besides.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import MakeLab
from tests.test_check_lab import assert_nothing_left_behind, results, run_check

pytestmark = pytest.mark.lab

CARGO_ENV = (Path(__file__).parent / "data" / "shell" / "rustup_cargo_env.txt").read_text()


def test_a_node_whose_bashrc_prints_passes_with_a_note(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(2)
    node = lab.node(2)
    lab.node_file(node, "/root/.bashrc", f"cat <<'EOF'\n{CARGO_ENV}EOF\necho 'bashrc: on stderr' >&2\n")
    run, data = run_check(lab, tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    assert data["verdict"] == "pass"
    # The job ran on node 2 too, from the facts probe that stayed there (its lines read by frame).
    assert "pass" in [r["status"] for r in results(data, "allreduce")]
    notes = [r for r in results(data, "connect") if r["details"].get("note")]
    assert len(notes) == 1 and notes[0]["hosts"] == [node.address], notes
    assert notes[0]["details"]["first_lines"] == {node.address: "PATH environment variable set."}
    assert "scp and rsync" in notes[0]["summary"]
    shell_output = next(h for h in data["hosts"] if h["name"] == node.address)["facts"]["connection"][
        "shell_output"
    ]
    assert shell_output["text"] == CARGO_ENV.strip()
    assert all(h["reachable"] for h in data["hosts"])
    assert_nothing_left_behind(lab)
