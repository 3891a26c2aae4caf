"""A node whose shell or wrapper prints hundreds of megabytes before its probe's answer costs the
controller a few MiB, not hundreds: the probe's framed answer is read from what is kept of the
end, and the node is named in a note."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from tests.lab import NODE_PYTHON, MakeLab
from tests.test_check_lab import check_argv

pytestmark = pytest.mark.lab

FLOOD_BYTES = 400 << 20


def test_a_flooding_node_is_named_and_the_controller_stays_small(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(2)
    # The nodes' interpreter, as the operator points --python at it: on node2 a wrapper that
    # floods stdout before it runs Python. It lives in the lab root, which the nodes can read.
    wrapper = lab.root / "python-wrapper"
    wrapper.write_text(
        "#!/bin/sh\n"
        f'[ "$(hostname)" = {lab.node(2).name} ] && head -c {FLOOD_BYTES} /dev/zero | tr "\\0" x\n'
        f'exec {NODE_PYTHON} "$@"\n',
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    report = tmp_path / "run.json"
    argv = check_argv(lab, lab.hosts_file(tmp_path / "hosts.txt"), report, "--only", "connect")
    argv[argv.index("--python") + 1] = str(wrapper)
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    controller = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env)
    watched = psutil.Process(controller.pid)
    peak = 0
    while controller.poll() is None:
        try:
            peak = max(peak, watched.memory_info().rss)
        except psutil.NoSuchProcess:
            break
        time.sleep(0.02)
    output = controller.communicate(timeout=120)[0].decode()

    assert controller.returncode == 0, output
    print(f"controller peak RSS {peak >> 20} MiB with a {FLOOD_BYTES >> 20} MiB flood")
    assert peak < 200 << 20, f"the controller grew to {peak >> 20} MiB"
    data = json.loads(report.read_text())
    notes = [r for r in data["results"] if r["check"] == "connect" and r["details"].get("note")]
    assert [n["hosts"] for n in notes] == [[lab.node(2).address]], notes
    assert notes[0]["details"]["bytes"][lab.node(2).address] >= FLOOD_BYTES
