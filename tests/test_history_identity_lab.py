"""One node in the history however it was reached, on SQLite and on PostgreSQL: two lab nodes made
to look like GPU nodes are checked by their addresses, by ssh_config aliases, through Slurm's srun
(whose node names are not the hosts' names), and by the node's own prolog (``preflight check
--local``, run on the node, writing to the same store over the network for PostgreSQL). The store
keeps two nodes, each with every name that reached it; the prolog sees the GPU replaced since the
full runs; ``preflight history --runs --node`` finds a node's runs by any of its names.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from preflight.history.local import GPU_SWAPPED
from preflight.history.store import open_store
from tests.lab import NODE_PYTHON, GpuNode, LabCluster, MakeLab
from tests.lab.postgres import PostgresUnavailable, postgres_server
from tests.test_check_lab import run_check
from tests.test_history import _unavailable
from tests.test_slurm_lab import salloc_check

pytestmark = pytest.mark.lab

PREFLIGHT = str(Path(sys.executable).with_name("preflight"))
# GPU 3 of node 1 after it was replaced: another serial and UUID in the same slot.
REPLACED = {"serial": "1999999000003", "uuid": "GPU-99999999-0000-0000-0000-000000000003"}


@contextmanager
def _store(backend: str, lab: LabCluster, shared: Path) -> Iterator[str]:
    """The store every run of the test writes to: a file the nodes see too (outside /tmp, which
    each lab node has of its own), or a PostgreSQL server the nodes reach on the lab's bridge."""
    if backend == "sqlite":
        yield str(shared / "history.sqlite")
        return
    try:
        import psycopg  # noqa: F401
    except ImportError:
        _unavailable("psycopg is not installed (pip install '.[postgres]')")
    try:
        with postgres_server(also_on=[lab.bridge_address]) as url:
            yield url.replace("127.0.0.1", lab.bridge_address)
    except PostgresUnavailable as exc:
        _unavailable(str(exc))


def _rows(store: str, sql: str) -> list[tuple[Any, ...]]:
    opened = open_store(store)
    try:
        return [tuple(row) for row in opened.query(sql)]
    finally:
        opened.close()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_a_node_reached_four_ways_is_one_node_and_its_prolog_sees_a_replaced_gpu(
    make_lab: MakeLab,
    slurm_on: Any,
    tmp_path: Path,
    backend: str,
) -> None:
    lab = make_lab(2)
    for node in lab.nodes:
        lab.make_gpu_node(node, GpuNode())
    slurm = slurm_on(lab, node_prefix="sl-")
    shared = Path(tempfile.mkdtemp(dir="/var/tmp", prefix="pf-history-"))
    with _store(backend, lab, shared) as store:
        config = shared / "preflight.toml"
        config.write_text(f'[history]\nstore = "{store}"\n')
        full = ("--only", "versions,gpu_memory,limits", "--config", str(config))

        by_address, _ = run_check(lab, tmp_path, *full)
        assert by_address.returncode == 0, by_address.stdout[-2000:]

        aliases = {f"gpu-{n.index}": n for n in lab.nodes}
        ssh_config = tmp_path / "ssh_config"
        ssh_config.write_text(
            "".join(f"Host {a}\n  HostName {n.address}\n  User root\n\n" for a, n in aliases.items())
        )
        hosts = tmp_path / "aliases.txt"
        hosts.write_text("\n".join(aliases) + "\n")
        by_alias, _ = run_check(lab, tmp_path, *full, "--ssh-config", str(ssh_config), hosts=hosts)
        assert by_alias.returncode == 0, by_alias.stdout[-2000:]

        by_srun, data = salloc_check(slurm, 2, tmp_path / "srun.json", *full)
        assert by_srun.returncode == 0, by_srun.stdout[-2000:] + by_srun.stderr[-2000:]
        assert [h["name"] for h in data["hosts"]] == ["sl-node1", "sl-node2"]

        node = lab.nodes[0]
        lab.make_gpu_node(node, GpuNode(changes={3: REPLACED}))
        report = shared / "local.json"
        prolog = [PREFLIGHT, "check", "--local", "--python", NODE_PYTHON, "-q", "--config", str(config),
                  "--json", str(report)]  # fmt: skip
        local = lab.exec(node, prolog, timeout_s=120, check=False)
        assert local.returncode == 0, local.stdout.decode()[-2000:] + local.stderr.decode()[-2000:]

        reached: dict[str, set[str]] = {}
        for identity, name in _rows(store, "SELECT node, reached_as FROM nodes"):
            reached.setdefault(identity, set()).add(name)
        # Each machine is one node, known by its own host name, with every name that reached it.
        assert reached.keys() == {"node1", "node2"}
        for alias, n in aliases.items():
            assert {n.address, alias, slurm.slurm_name(n)} <= reached[n.name]
        assert reached["node1"] - {node.address, "gpu-1", "sl-node1"} <= {"node1"}  # the prolog's name
        # The prolog compared the node with its last full run, the srun one, and named the new GPU.
        found = json.loads(report.read_text())
        swapped = [
            r for r in found["results"] if r["check"] == "history" and r["details"].get("item") == GPU_SWAPPED
        ]
        assert len(swapped) == 1, found["results"]
        assert "GPU 3 is 1999999000003, was 0000001000003" in swapped[0]["summary"]

        for name in (node.address, "gpu-1", "sl-node1"):
            listed = subprocess.run(
                [PREFLIGHT, "history", "--runs", "--json", "--node", name, "--config", str(config)],
                capture_output=True, text=True, timeout=60, check=True,
            )  # fmt: skip
            assert len(json.loads(listed.stdout)["runs"]) == 4, name
