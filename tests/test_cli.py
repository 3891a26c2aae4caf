"""The command line on this machine: usage errors exit 2 with one line, the local check works."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PYTHON = sys.executable


def preflight(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "NO_COLOR": "1", "COLUMNS": "200"}
    return subprocess.run(
        [PYTHON, "-m", "preflight", *args], capture_output=True, text=True, timeout=120, env=env, cwd=cwd
    )


def test_version_and_list() -> None:
    assert preflight("--version").stdout.strip().startswith("preflight 0.1.0")
    listed = preflight("list").stdout.split("\n")
    assert [line.split()[0] for line in listed if line][:3] == ["connect", "versions", "ports"]


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("gpu01\ngpu02 slots=x\n", "hosts.txt:2: slots must be a whole number"),
        ("gpu01\ngpu01\n", "hosts.txt:2: duplicate host gpu01 (first on line 1)"),
        ("# empty\n", "hosts.txt: the hosts file names no host"),
    ],
)
def test_a_bad_hosts_file_is_one_line_and_exit_2(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "hosts.txt").write_text(content)
    run = preflight("check", "hosts.txt", cwd=tmp_path)
    assert run.returncode == 2
    assert run.stderr.strip() == f"preflight: error: {message}" or message in run.stderr
    assert len(run.stderr.strip().splitlines()) == 1
    assert "Traceback" not in run.stderr


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["check", "--only", "versoins"], "--only: unknown check 'versoins'"),
        (["check", "--config", "missing.toml"], "missing.toml: no such config file"),
        (["report", "missing.json"], "missing.json: no such report file"),
        (["check", "--fanout", "0"], "--fanout must be at least 1"),
        (["check", "--only", ""], "--only: no check named"),
        (["check", "--skip", " , "], "--skip: no check named"),
    ],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str], message: str) -> None:
    run = preflight(*args, cwd=tmp_path)
    assert run.returncode == 2, run.stderr
    assert message in run.stderr
    assert "Traceback" not in run.stderr


OUTPUTS = ["--json", "--html", "--junit", "--prometheus", "--good-hosts", "--bad-hosts"]


@pytest.mark.parametrize("option", OUTPUTS)
def test_an_output_that_cannot_be_written_is_refused_before_any_node_is_contacted(
    tmp_path: Path, option: str
) -> None:
    # A node nobody answers for: were it contacted first, the run would take the connect timeout.
    (tmp_path / "hosts.txt").write_text("192.0.2.1\n")
    (tmp_path / "a-directory").mkdir()
    for target, why in (("missing/out", "No such file or directory"), ("a-directory", "is a directory")):
        run = preflight("check", "hosts.txt", option, target, "--connect-timeout", "30", cwd=tmp_path)
        assert run.returncode == 2, run.stderr
        assert run.stderr.strip() == f"preflight: error: {option} {target}: " + (
            why if why == "is a directory" else f"cannot write there: {why}"
        )
        assert "192.0.2.1" not in run.stdout + run.stderr


def test_a_file_that_is_not_a_report_is_named(tmp_path: Path) -> None:
    (tmp_path / "run.json").write_text('{"schema_version": 7}')
    run = preflight("report", "run.json", cwd=tmp_path)
    assert run.returncode == 2
    assert "run.json: not a preflight run report: schema_version 7 is not supported" in run.stderr


def test_without_a_hosts_file_this_machine_is_checked_without_ssh(tmp_path: Path) -> None:
    run = preflight("check", "--python", PYTHON, "--json", "run.json", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads((tmp_path / "run.json").read_text())
    (host,) = data["hosts"]
    assert host["reachable"] is True
    assert host["facts"]["connection"]["transport"] == "local"
    assert host["facts"]["hostname"] == os.uname().nodename
    assert host["facts"]["python"]["executable"]
    assert data["verdict"] == "pass"
    assert "PASS" in run.stdout


def test_this_machine_is_checked_with_the_interpreter_preflight_runs_in(tmp_path: Path) -> None:
    """The first run a newcomer makes: no hosts file, no --python. The probes and the job run with
    the environment preflight was installed into (which has torch here), so the job really runs."""
    env = {key: value for key, value in os.environ.items() if key != "PREFLIGHT_PYTHON"}
    run = subprocess.run(
        [PYTHON, "-m", "preflight", "check", "--json", "run.json"],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "NO_COLOR": "1", "COLUMNS": "200"},
        cwd=tmp_path,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    data = json.loads((tmp_path / "run.json").read_text())
    (host,) = data["hosts"]
    assert Path(host["facts"]["python"]["executable"]).resolve() == Path(PYTHON).resolve()
    results = {r["check"]: r for r in data["results"]}
    assert results["ddp"]["status"] == "pass" and "trained" in results["ddp"]["summary"]
    assert results["compute"]["status"] == "pass"


def test_json_to_stdout_keeps_stdout_clean(tmp_path: Path) -> None:
    run = preflight("check", "--python", PYTHON, "--json", "-", "--only", "connect", cwd=tmp_path)
    assert run.returncode == 0
    assert json.loads(run.stdout)["schema_version"] == 1


def test_a_saved_run_is_rendered_again_with_its_exit_code(tmp_path: Path) -> None:
    preflight("check", "--python", PYTHON, "--json", "run.json", "-q", cwd=tmp_path)
    run = preflight("report", "run.json", "--json", "again.json", cwd=tmp_path)
    assert run.returncode == 0
    assert "connect" in run.stdout
    first = json.loads((tmp_path / "run.json").read_text())
    assert json.loads((tmp_path / "again.json").read_text()) == first


def test_a_missing_python_on_the_host_is_named(tmp_path: Path) -> None:
    run = preflight("check", "--python", "/nonexistent/python3", "--json", "run.json", cwd=tmp_path)
    assert run.returncode == 3
    data = json.loads((tmp_path / "run.json").read_text())
    assert data["hosts"][0]["error"]["kind"] == "python_missing"
    assert "/nonexistent/python3" in data["results"][0]["summary"]
