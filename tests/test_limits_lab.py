"""``limits`` on the lab cluster through real SSH: a node whose /tmp is all but full is named alone,
with /tmp and what writes there; the job's own variables move the places every node measures."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.lab import MakeLab
from tests.test_check_lab import assert_nothing_left_behind, results, run_check

pytestmark = pytest.mark.lab

GIB = 1 << 30
TORCH_HOME = "/var/tmp/pflab-no-such-torch-home"  # not made: measured at /var/tmp


def test_a_node_with_a_full_tmp_is_named_alone_and_the_jobs_variables_are_followed(
    make_lab: MakeLab, tmp_path: Path
) -> None:
    lab = make_lab(3)
    full = lab.nodes[1]
    # Each node's /tmp is a tmpfs of its own, half the machine's memory: one made 1 MiB. The need
    # is the config's, so that the other nodes have room on any machine the lab runs on.
    lab.exec(full, ["mount", "-o", "remount,size=1m", "/tmp"])
    config = tmp_path / "preflight.toml"
    config.write_text('[limits]\nmin_scratch_free = "1 GiB"\n')
    run, data = run_check(
        lab, tmp_path, "--only", "limits", "--config", str(config), "--env", f"TORCH_HOME={TORCH_HOME}"
    )
    assert run.returncode == 1, run.stdout[-3000:]
    named = [r for r in results(data, "limits") if r["status"] in ("warn", "fail")]
    assert [(r["status"], r["hosts"], r["details"]["item"]) for r in named] == [
        ("fail", [full.address], "scratch_space")
    ], named
    (finding,) = named
    assert finding["summary"].startswith(f"{full.address}: only 1 MiB free on /tmp, below the 1 GiB")
    assert finding["details"]["places"] == ["tmp", "inductor"]
    assert finding["details"]["paths"] == ["/tmp", "/tmp/torchinductor_root"]
    rows = finding["details"]["nodes"]
    for other in (lab.nodes[0], lab.nodes[2]):
        assert rows[other.address]["scratch_free_bytes"]["tmp"] >= GIB
    for host in data["hosts"]:
        torch = host["facts"]["scratch"]["torch"]
        assert (torch["path"], torch["source"], torch["measured"]) == (TORCH_HOME, "TORCH_HOME", "/var/tmp")
        assert host["facts"]["scratch"]["tmp"]["mount"] == "/tmp"
    assert_nothing_left_behind(lab)
