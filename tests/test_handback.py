"""The hand-back: which nodes a launcher gets, which it leaves out and what an operator does with
them, judged on runs recorded on the lab cluster (tests/data/reports/SOURCES.md); and the
files and metrics the command line writes from it."""

from __future__ import annotations

import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from preflight.cli import main
from preflight.errors import ExitCode
from preflight.handback import Handback, hand_back
from preflight.model import RunReport
from preflight.registry import all_checks, unreached_check
from reports import prometheus

REPORTS = Path(__file__).parent / "data" / "reports"
ACTIONS = {c.name: c.action for c in all_checks()}
UNREACHED = unreached_check()


def recorded(name: str) -> RunReport:
    return RunReport.from_dict(json.loads((REPORTS / f"{name}.json").read_text()))


def judged(name: str, min_nodes: int | None = None) -> Handback:
    report = recorded(name)
    return hand_back(report.hosts, report.results, ACTIONS, unreached_check=UNREACHED, min_nodes=min_nodes)


def test_a_healthy_run_hands_back_every_node_and_drains_none() -> None:
    handback = judged("healthy")
    assert handback.good == ("node1", "node2", "node3")
    assert handback.bad == ()
    assert handback.drain_commands() == []


def test_a_drifted_node_is_left_out_with_its_configuration_to_fix() -> None:
    handback = judged("drift")
    assert handback.good == ("node1", "node2", "node4")
    [bad] = handback.bad
    assert (bad.name, bad.checks, bad.action) == ("node3", ("versions",), "fix_config")
    assert "nvidia-nccl-cu12" in bad.reason
    assert handback.drain_commands() == [
        "scontrol update nodename=node3 state=drain "
        "reason='preflight: versions failed; fix its software or configuration'"
    ]


def test_a_node_slow_with_every_partner_is_drained() -> None:
    [bad] = judged("slow_node").bad
    assert (bad.name, bad.checks, bad.action) == ("node3", ("allreduce",), "drain")


def test_a_node_that_did_not_answer_is_to_be_rebooted_and_not_handed_back() -> None:
    handback = judged("unreachable")
    assert handback.good == ("node1", "node2", "node3")
    [bad] = handback.bad
    assert (bad.name, bad.checks, bad.action) == ("node4", ("connect",), "reboot")
    assert "no answer" in bad.reason


def test_min_nodes_passes_when_enough_nodes_are_good_and_not_otherwise() -> None:
    assert judged("slow_node", min_nodes=2).enough
    assert not judged("slow_node", min_nodes=3).enough
    assert not judged("slow_node").enough  # without --min-nodes every failure counts


def test_a_failure_that_names_no_node_cannot_be_routed_around() -> None:
    report = recorded("slow_node")
    # The same run, had the judge blamed the world instead of node3.
    results = [replace(r, hosts=()) if r.status == "fail" else r for r in report.results]
    handback = hand_back(report.hosts, results, ACTIONS, unreached_check=UNREACHED, min_nodes=1)
    assert handback.unplaced == ("allreduce",)
    assert handback.bad == ()
    assert not handback.enough


def test_min_nodes_met_turns_the_exit_code_to_pass_and_keeps_the_findings() -> None:
    report = recorded("slow_node")
    handback = hand_back(report.hosts, report.results, ACTIONS, unreached_check=UNREACHED, min_nodes=2)
    rebuilt = RunReport.build(
        tool_version=report.tool_version,
        started_at=report.started_at,
        duration_s=report.duration_s,
        hosts=report.hosts,
        results=report.results,
        handback=handback.to_dict(),
        enough_nodes=handback.enough,
    )
    assert rebuilt.exit_code == ExitCode.OK
    assert [r.hosts for r in rebuilt.results if r.status == "fail"] == [("node3",)]
    again = RunReport.from_dict(json.loads(json.dumps(rebuilt.to_dict())))
    assert again.handback is not None
    assert again.handback["bad"][0] == {
        "name": "node3",
        "checks": ["allreduce"],
        "reason": again.handback["bad"][0]["reason"],
        "action": "drain",
    }
    assert again.handback["good_folded"] == "node[1-2]"


def test_report_writes_the_good_and_bad_hosts_files_a_launcher_reads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    code = main(["report", str(REPORTS / "drift.json"), "--good-hosts", str(good), "--bad-hosts", str(bad)])
    assert code == ExitCode.CHECK_FAILED
    assert good.read_text() == "node1\nnode2\nnode4\n"
    assert bad.read_text() == "node3\n"
    out = capsys.readouterr().out
    assert "good nodes (3): node[1-2,4]" in out
    assert "scontrol update nodename=node3 state=drain" in out


# --------------------------------------------------------------------------- Prometheus

_SAMPLE = re.compile(r'^([a-z_]+)(\{(?:[a-z_]+="(?:[^"\\]|\\.)*",?)*\})? (-?[0-9.e+-]+)$')


def samples(text: str) -> dict[str, float]:
    """The samples of a textfile, by name and labels; every line must be a comment or a sample."""
    found = {}
    for line in text.splitlines():
        if line.startswith("# HELP ") or line.startswith("# TYPE "):
            continue
        match = _SAMPLE.match(line)
        assert match, f"not a sample: {line!r}"
        found[match[1] + (match[2] or "")] = float(match[3])
    return found


def test_prometheus_gauges_name_the_slow_node_per_check_with_busbw_and_ratio() -> None:
    report = recorded("slow_node")
    found = samples(prometheus.render(report))
    assert found['preflight_check_ok{check="allreduce",node="node3"}'] == 0
    assert found['preflight_check_ok{check="allreduce",node="node1"}'] == 1
    assert found['preflight_check_ok{check="versions",node="node3"}'] == 1
    assert found["preflight_run_exit_code"] == 1
    assert found['preflight_node_ratio{check="allreduce",node="node3"}'] < 0.01
    [sweep] = [r.details["sweep"] for r in report.results if "sweep" in r.details]
    largest = max(sweep, key=lambda row: row["size_bytes"])
    labels = f'{{check="allreduce",size_bytes="{largest["size_bytes"]}"}}'
    busbw = found["preflight_allreduce_busbw_gbytes_per_second" + labels]
    assert busbw == pytest.approx(largest["busbw_gbps"])


def test_prometheus_leaves_an_unreached_node_unmeasured_not_passed() -> None:
    found = samples(prometheus.render(recorded("unreachable")))
    assert found['preflight_check_ok{check="connect",node="node4"}'] == 0
    assert 'preflight_check_ok{check="versions",node="node4"}' not in found
    assert found['preflight_check_ok{check="versions",node="node1"}'] == 1


def test_prometheus_file_is_written_from_a_saved_run(tmp_path: Path) -> None:
    target = tmp_path / "preflight.prom"
    main(["report", str(REPORTS / "healthy.json"), "-q", "--prometheus", str(target)])
    assert samples(target.read_text())["preflight_run_exit_code"] == 0
    assert [p.name for p in tmp_path.iterdir()] == ["preflight.prom"]  # no temporary file left


# --------------------------------------------------------------------------- --local


def test_local_mode_passes_this_node_in_one_line_and_writes_nothing_else(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SLURMD_NODENAME", "gpu07")
    code = main(["check", "--local", "--json", "run.json"])
    out = capsys.readouterr().out.splitlines()
    assert code == ExitCode.OK
    assert len(out) == 1 and out[0].startswith("preflight: pass on gpu07")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.json"]
    run = json.loads((tmp_path / "run.json").read_text())
    assert {r["check"] for r in run["results"]} == {"connect", "versions", "gpu_memory", "limits"}


def test_local_mode_fails_a_node_without_its_python_with_a_status_below_126(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("SLURMD_NODENAME", "gpu07")
    code = main(["check", "--local", "--python", "/opt/no-such-env/bin/python"])
    out = capsys.readouterr().out.splitlines()
    assert code == ExitCode.HOSTS_UNCHECKED
    assert 0 < code < 126
    assert len(out) == 2
    assert out[0].startswith("preflight: ERROR connect: gpu07") and "/opt/no-such-env/bin/python" in out[0]


def test_min_nodes_beyond_the_nodes_checked_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--nodes", "gpu[1-3]", "--min-nodes", "4"]) == ExitCode.USAGE_ERROR
    assert "--min-nodes must be from 1 to the 3 nodes checked, not 4" in capsys.readouterr().err


def test_local_mode_refuses_hosts_and_checks_between_nodes(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "--local", "--nodes", "gpu[1-2]"]) == ExitCode.USAGE_ERROR
    assert main(["check", "--local", "--only", "ports"]) == ExitCode.USAGE_ERROR
    assert "ports runs between nodes" in capsys.readouterr().err
