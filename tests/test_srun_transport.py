"""The srun transport's pure parts: the inventory read from an allocation's environment, and the
step command line (the steps themselves run on a real Slurm in tests/test_slurm_lab.py)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from preflight.cli import main
from preflight.errors import ExitCode, InputError, UsageError
from preflight.inventory import HostSpec
from preflight.transport import PGID_MARKER
from preflight.transport.srun import (
    SrunSettings,
    SrunTransport,
    allocation_inventory,
    in_allocation,
    step_command,
)

# What sbatch sets for `sbatch -N4 --gpus-per-node=8` (names and counts as Slurm 22.05 writes them).
ALLOCATION = {
    "SLURM_JOB_ID": "4242",
    "SLURM_JOB_NODELIST": "gpu[01-03],gpu10",
    "SLURM_JOB_CPUS_PER_NODE": "96(x4)",
    "SLURM_GPUS_PER_NODE": "h100:8",
}


def test_the_inventory_is_the_allocations_nodes_with_their_gpus_as_slots() -> None:
    settings, hosts = allocation_inventory(ALLOCATION)
    assert settings == SrunSettings(job_id="4242")
    assert [h.name for h in hosts] == ["gpu01", "gpu02", "gpu03", "gpu10"]
    assert {h.slots for h in hosts} == {8}
    assert not any(h.local for h in hosts)


def test_without_gpus_asked_for_a_node_has_no_slots_whatever_its_cpus() -> None:
    _, hosts = allocation_inventory({k: v for k, v in ALLOCATION.items() if k != "SLURM_GPUS_PER_NODE"})
    assert {h.slots for h in hosts} == {None}


def test_nodes_picks_within_the_allocation_and_refuses_nodes_outside_it() -> None:
    _, hosts = allocation_inventory(ALLOCATION, nodes="gpu[02-03]")
    assert [h.name for h in hosts] == ["gpu02", "gpu03"]
    with pytest.raises(UsageError, match=r"gpu\[04-05\] not in this allocation"):
        allocation_inventory(ALLOCATION, nodes="gpu[03-05]")


def test_outside_an_allocation_slurm_mode_says_so() -> None:
    assert not in_allocation({})
    assert in_allocation(ALLOCATION)
    with pytest.raises(UsageError, match="not inside a Slurm allocation"):
        allocation_inventory({})
    with pytest.raises(InputError, match="SLURM_JOB_NODELIST"):
        allocation_inventory({"SLURM_JOB_ID": "1"})


def test_slurm_mode_outside_an_allocation_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("SLURM_JOB_ID", raising=False)
    assert main(["check", "--slurm"]) == ExitCode.USAGE_ERROR
    assert "not inside a Slurm allocation" in capsys.readouterr().err


def test_an_allocation_without_srun_on_the_path_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    for name, value in ALLOCATION.items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("PATH", str(tmp_path))
    assert main(["check"]) == ExitCode.USAGE_ERROR
    assert "srun not found" in capsys.readouterr().err


def test_a_step_is_one_task_on_its_node_bounded_twice() -> None:
    transport = SrunTransport(HostSpec(name="gpu02", address="gpu02"), SrunSettings(job_id="4242"))
    argv = transport.step_argv(["python3", "-", "--flag"], timeout_s=125)
    command_at = argv.index("sh")
    options = argv[:command_at]
    assert options[0] == "srun"
    assert {
        "--jobid=4242",
        "--nodes=1",
        "--ntasks=1",
        "--nodelist=gpu02",
        "--overlap",
        "--kill-on-bad-exit=1",
    } <= set(options)
    assert "--time=3" in options  # minutes: the node's deadline, its kill delay and srun's grace, rounded up
    inner = argv[command_at + 2]
    assert argv[command_at : command_at + 2] == ["sh", "-c"]
    assert f"echo {PGID_MARKER.decode()}$$" in inner
    assert "timeout -k 3 125 python3 - --flag" in inner
    assert inner.endswith("echo preflight-exit=$status >&2; exit $status")


def test_the_step_command_reports_how_its_command_ended_and_quotes_every_word() -> None:
    tricky = "it's; $(echo not run) `x`"
    argv = step_command([sys.executable, "-c", "import sys; print(sys.argv[1]); sys.exit(3)", tricky], 10)
    ran = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert ran.returncode == 3
    assert ran.stdout == tricky + "\n"
    assert ran.stderr.splitlines()[0].startswith("preflight-pgid=")
    assert ran.stderr.splitlines()[-1] == "preflight-exit=3"
