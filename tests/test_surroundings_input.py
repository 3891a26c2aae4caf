"""What the storage and environment options accept, judged before any node is contacted: the
paths are on the nodes (the controller never reads them), sizes and assignments must parse."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from checks.storage.settings import StorageSection
from preflight.config_file import load_config
from preflight.errors import ConfigError, InputError
from preflight.jobenv import job_environment, read_env_file
from preflight.units import parse_size


def preflight(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1"}
    return subprocess.run(
        [sys.executable, "-m", "preflight", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        cwd=cwd,
    )


@pytest.mark.parametrize(
    ("text", "size"),
    [
        ("140GiB", 140 << 30),
        ("140 GiB", 140 << 30),
        ("1.5T", int(1.5 * (1 << 40))),
        ("500GB", 500 * 10**9),
        ("64M", 64 << 20),
        ("64Mi", 64 << 20),
        ("4096", 4096),
        ("2 kb", 2000),
    ],
)
def test_sizes_read_binary_unless_the_unit_says_decimal(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["12QB", "", "GiB", "1e3", "-5G", "5 G B"])
def test_a_size_that_does_not_parse_says_what_would(text: str) -> None:
    with pytest.raises(ValueError, match=r"is not a size \(examples: 140GiB"):
        parse_size(text)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--checkpoint-size", "12QB"], "--checkpoint-size: '12QB' is not a size"),
        (["--data", "datasets/imagenet"], "--data: 'datasets/imagenet' is not an absolute path"),
        (["--data", ""], "--data: an empty path"),
        (["--checkpoint-dir", "ckpt"], "--checkpoint-dir: 'ckpt' is not an absolute path"),
        (["--env", "NCCL_DEBUG"], "--env: 'NCCL_DEBUG' is not NAME=VALUE"),
        (["--env", "2X=1"], "--env: '2X' is not an environment variable name"),
        (["--env-file", "missing.env"], "missing.env: no such environment file"),
    ],
)
def test_bad_input_is_one_line_and_exit_2_before_any_node_is_contacted(
    tmp_path: Path, args: list[str], message: str
) -> None:
    # An address where nothing could answer: an error here must come before any connection.
    (tmp_path / "hosts.txt").write_text("192.0.2.1\n")
    run = preflight("check", "hosts.txt", *args, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    (line,) = run.stderr.strip().splitlines()
    assert line.startswith("preflight: error: ")
    assert message in line
    assert "Traceback" not in run.stderr


def test_a_data_path_the_controller_does_not_have_is_not_an_error(tmp_path: Path) -> None:
    """The controller is often a laptop: paths on the nodes are never looked up here."""
    run = preflight(
        "check",
        "--data",
        "/nonexistent/on/this/machine",
        "--only",
        "connect",
        "--timeout",
        "30",
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stderr


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ('[storage]\ndata = ["relative/path"]\n', "storage.data: 'relative/path' is not an absolute path", 2),
        ('[storage]\n\ncheckpoint_size = "12QB"\n', "storage.checkpoint_size: '12QB' is not a size", 3),
        ('[storage]\ncheckpoint_free = "plenty"\n', "storage.checkpoint_free: 'plenty' is not a size", 2),
        ('[limits]\nmin_shm = "lots"\n', "limits.min_shm: 'lots' is not a size", 2),
        ('[job_env]\n"NOT A NAME" = "x"\n', "not an environment variable name", None),
        ('[environment]\nignore = "NCCL_DEBUG"\n', "environment.ignore must be a list of strings", 2),
    ],
)
def test_bad_surroundings_in_a_config_name_the_file_and_line(
    tmp_path: Path, text: str, message: str, line: int | None
) -> None:
    path = tmp_path / "preflight.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    assert message in str(caught.value)
    assert caught.value.line == line


def test_surroundings_are_read_from_a_config(tmp_path: Path) -> None:
    path = tmp_path / "preflight.toml"
    path.write_text(
        '[storage]\ndata = ["/datasets/a", "/datasets/b"]\ncheckpoint_dir = "/ckpt"\n'
        'checkpoint_size = "140GiB"\n[job_env]\nNCCL_SOCKET_IFNAME = "eth0"\nOMP_NUM_THREADS = 8\n'
    )
    config = load_config(path)
    assert config.section(StorageSection).data == ("/datasets/a", "/datasets/b")
    assert config.section(StorageSection).checkpoint_bytes == 140 << 30
    assert config.job_env == {"NCCL_SOCKET_IFNAME": "eth0", "OMP_NUM_THREADS": "8"}


def test_the_jobs_environment_merges_config_then_files_then_options(tmp_path: Path) -> None:
    env_file = tmp_path / "job.env"
    env_file.write_text(
        "# the launcher's variables\n"
        "export NCCL_SOCKET_IFNAME=ib0\n"
        'NCCL_DEBUG="WARN"\n'
        "OMP_NUM_THREADS='4'\n"
        "EMPTY=\n"
    )
    merged = job_environment(
        {"NCCL_SOCKET_IFNAME": "eth0", "TORCH_NCCL_BLOCKING_WAIT": "1"},
        [env_file],
        ["OMP_NUM_THREADS=8", "NCCL_ALGO=Ring=x"],
    )
    assert merged == {
        "NCCL_SOCKET_IFNAME": "ib0",
        "TORCH_NCCL_BLOCKING_WAIT": "1",
        "NCCL_DEBUG": "WARN",
        "OMP_NUM_THREADS": "8",
        "EMPTY": "",
        "NCCL_ALGO": "Ring=x",
    }


def test_a_bad_line_in_an_environment_file_names_its_line(tmp_path: Path) -> None:
    env_file = tmp_path / "job.env"
    env_file.write_text("NCCL_DEBUG=INFO\nsource other.env\n")
    with pytest.raises(InputError, match=r"job.env:2: not NAME=VALUE: 'source other.env'"):
        read_env_file(env_file)
