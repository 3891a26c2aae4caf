"""Shared pytest fixtures."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.lab import LabCluster, MakeLab, missing_requirements  # the lab cluster block, below
from tests.lab.slurm import SlurmLab, missing_slurm

# =============================================================================================
# Lab cluster (tests/lab): SSH nodes built from Linux namespaces. Tests marked `lab` need root,
# `ip netns`, sshd, tc and iptables; they fail on CI when those are missing, and skip elsewhere.


def _on_ci() -> bool:
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def _require_lab() -> None:
    missing = missing_requirements()
    if not missing:
        return
    message = "lab cluster unavailable; missing: " + ", ".join(missing)
    if _on_ci():
        pytest.fail(message + " (CI must run the lab tests)", pytrace=False)
    pytest.skip(message)


@pytest.fixture(autouse=True)
def _lab_requirements(request: pytest.FixtureRequest) -> None:
    if request.node.get_closest_marker("lab") is not None:
        _require_lab()


@pytest.fixture
def make_lab() -> Iterator[MakeLab]:
    """make_lab(n, node_envs=None): a started lab of n nodes, each with the test environment
    (which has torch) at /opt/pflab/env unless node_envs gives another; stopped at teardown."""
    _require_lab()
    labs: list[LabCluster] = []

    def make(n_nodes: int, node_envs: Mapping[int, Path] | None = None) -> LabCluster:
        lab = LabCluster(n_nodes, env=Path(sys.prefix), node_envs=node_envs)
        labs.append(lab)
        return lab.start()

    yield make
    for lab in labs:
        lab.stop()


# ============================================================================= end lab cluster


def _history_store_of_its_own() -> Iterator[None]:
    """Runs write their history under a folder of their own, never the user's store. Not under
    /tmp: a lab node has a /tmp of its own, which the tests expect to find empty after a run on the
    node (``preflight check --local`` in a Slurm step writes its history there)."""
    state = tempfile.mkdtemp(prefix="preflight-state-", dir="/var/tmp")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("XDG_STATE_HOME", state)
        yield
    shutil.rmtree(state, ignore_errors=True)


@pytest.fixture(scope="module", autouse=True)
def _module_history_store() -> Iterator[None]:
    """A module's shared runs (module-scoped fixtures, set up before any test's own fixtures) have
    a store of their module's: a finding is not "the 2nd time" because another module made it."""
    yield from _history_store_of_its_own()


@pytest.fixture(autouse=True)
def _own_history_store() -> Iterator[None]:
    """Each test's own runs have a store of their own."""
    yield from _history_store_of_its_own()


@pytest.fixture
def slurm_on() -> Iterator[Any]:
    """slurm_on(lab, prolog=None, node_prefix=""): a started Slurm over the lab
    (tests/lab/slurm.py), stopped at teardown."""
    if missing := missing_slurm():
        message = "Slurm unavailable; missing: " + ", ".join(missing) + " (tests/run.sh installs them)"
        if _on_ci():
            pytest.fail(message + " (CI must run the Slurm tests)", pytrace=False)
        pytest.skip(message)
    started: list[SlurmLab] = []

    def start(lab: LabCluster, prolog: Path | None = None, node_prefix: str = "") -> SlurmLab:
        slurm = SlurmLab(lab, prolog=prolog, node_prefix=node_prefix)
        started.append(slurm)
        return slurm.start()

    yield start
    for slurm in started:
        slurm.stop()
