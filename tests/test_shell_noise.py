"""A node whose login shell prints on standard output is checked all the same, and named in a note.

bash runs ``~/.bashrc`` even for ``ssh host command``, and what it (or ``/etc/profile.d``, or a
message of the day) prints lands on the command's stdout, before the probe's own output. The
same output is what breaks ``rsync`` ("protocol version mismatch -- is your shell clean?"): the
captures in ``tests/data/shell/`` are real ones, from rust-lang/rustup#498 (``~/.cargo/env``
sourced from ``~/.bashrc``), sailfishos/issue-tracker#65 (a banner from ``/etc/profile.d``) and
sabamdarif/termux-desktop#279 (``ssh HOST false`` printing a banner and a system summary).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from checks.connect import judge_connect
from preflight.deadline import Deadline
from preflight.gather import close_all, facts_probe_args, gather
from preflight.inventory import local_host
from preflight.model import HostError, HostReport
from preflight.probes import ScriptAnswer, frame_marker, parse_script_output, start_node_script
from preflight.progress import NoProgress
from preflight.transport import CommandResult, HostUnavailable, split_pgid
from preflight.transport.local import LocalTransport

DATA = Path(__file__).parent / "data" / "shell"
CAPTURES = sorted(p.name for p in DATA.glob("*.txt"))
DOCUMENT = {"probe_version": 1, "facts": {"hostname": "node1"}}


def _capture(name: str) -> bytes:
    return (DATA / name).read_bytes()


def _parse(stdout: bytes, frame: bytes, *, cut: int = 0) -> ScriptAnswer:
    result = CommandResult(0, stdout, b"", False, 0.1, stdout_cut=cut)
    return parse_script_output(result, python="python3", timeout_s=60, frame=frame)


def _first_line(capture: bytes) -> str:
    return next(line.strip() for line in capture.decode().splitlines() if line.strip())


@pytest.mark.parametrize("capture", CAPTURES)
def test_a_banner_before_the_frame_is_the_shells_not_the_probes(capture: str) -> None:
    banner = _capture(capture)
    frame = frame_marker()
    answer = _parse(banner + frame + json.dumps(DOCUMENT).encode() + b"\n", frame)
    assert answer.document == DOCUMENT
    assert answer.shell_output == banner.strip()
    assert answer.shell_output_bytes == len(banner.strip())


@pytest.mark.parametrize("capture", CAPTURES)
def test_a_banner_after_the_document_is_the_shells_too(capture: str) -> None:
    banner = _capture(capture)
    frame = frame_marker()
    answer = _parse(b"Welcome\n" + frame + json.dumps(DOCUMENT).encode() + b"\n" + banner, frame)
    assert answer.document == DOCUMENT
    assert answer.shell_output.startswith(b"Welcome\n")
    assert answer.shell_output.endswith(banner.strip())


def test_a_banner_without_a_final_newline_does_not_hide_the_frame() -> None:
    frame = frame_marker()
    answer = _parse(b"You're ready to Rust!" + frame + json.dumps(DOCUMENT).encode() + b"\n", frame)
    assert (answer.document, answer.shell_output) == (DOCUMENT, b"You're ready to Rust!")


def test_a_clean_shell_leaves_no_shell_output() -> None:
    frame = frame_marker()
    answer = _parse(frame + json.dumps(DOCUMENT).encode() + b"\n", frame)
    assert (answer.document, answer.shell_output, answer.shell_output_bytes) == (DOCUMENT, b"", 0)


def test_output_without_this_commands_frame_is_not_a_document() -> None:
    """A frame line with another command's nonce (or none at all) is not this script's output."""
    frame = frame_marker()
    for stdout in (
        json.dumps(DOCUMENT).encode() + b"\n",
        _capture("rustup_cargo_env.txt") + frame_marker() + json.dumps(DOCUMENT).encode() + b"\n",
    ):
        with pytest.raises(HostUnavailable) as caught:
            _parse(stdout, frame)
        assert caught.value.error.kind == "probe_failed"
        assert "no frame" in caught.value.error.message


def test_a_framed_output_that_is_not_json_says_what_it_printed() -> None:
    frame = frame_marker()
    with pytest.raises(HostUnavailable) as caught:
        _parse(
            _capture("sailfish_profile_banner.txt") + frame + b"Traceback (most recent call last)\n", frame
        )
    assert caught.value.error.kind == "probe_failed"
    assert "Traceback" in caught.value.error.message and "Sailfish" not in caught.value.error.message


def test_the_process_group_line_is_found_after_what_the_shell_printed_on_stderr() -> None:
    stderr = b"TERM environment variable not set.\npreflight-pgid=4242\nthe script's own\n"
    assert split_pgid(stderr) == (4242, b"TERM environment variable not set.\nthe script's own\n")
    assert split_pgid(b"banner\npreflight-pgid=42") == (None, b"banner\npreflight-pgid=42")  # not ended yet


def _chatty_python(tmp_path: Path, before: str, after: str) -> str:
    """An interpreter as a node's login shell would run it: what its startup files print comes
    first on stdout (and some on stderr), and a trap prints more when the command is over."""
    wrapper = tmp_path / "python"
    wrapper.write_text(
        "#!/bin/sh\n"
        f"cat {DATA / before}\n"
        "echo 'stty: standard input: Inappropriate ioctl for device' >&2\n"
        f'{sys.executable} "$@"\n'
        "status=$?\n"
        f"cat {DATA / after}\n"
        "exit $status\n",
        encoding="utf-8",
    )
    wrapper.chmod(0o755)
    return str(wrapper)


def test_a_line_talking_script_reads_its_own_lines_after_the_shells(tmp_path: Path) -> None:
    python = _chatty_python(tmp_path, "termux_desktop_motd.txt", "rustup_cargo_env.txt")
    with LocalTransport(local_host()) as transport:
        process = start_node_script(transport, "checks.clocks.node", python=python, timeout_s=30)
        assert process.readline(Deadline.after(20)) == b"READY"
        process.write(b"now\n")
        assert (process.readline(Deadline.after(20)) or b"").isdigit()
        process.write(b"DONE\n")
        process.close_stdin()
        assert process.wait().exit_status == 0
    assert process.before_frame.startswith(b"TERM environment variable not set.")


@pytest.mark.parametrize("stay", [False, True], ids=["answers-once", "stays"])
def test_a_node_whose_shell_prints_is_checked_and_named_in_a_note(tmp_path: Path, stay: bool) -> None:
    python = _chatty_python(tmp_path, "sailfish_profile_banner.txt", "rustup_cargo_env.txt")
    sessions = gather(
        [local_host()],
        LocalTransport,
        python=python,
        probe_timeout_s=60,
        fanout=1,
        deadline=Deadline.after(90),
        progress=NoProgress(),
        args=facts_probe_args({}, ("json",) if stay else ()),
        stay=stay,
    )
    try:
        report = sessions[0].report
        assert report.reachable and report.error is None, report.error
        shell_output = report.node.connection["shell_output"]
        assert shell_output["text"].startswith(",---\n| Sailfish OS 5.2.0.17 (Finlayson)")
        assert shell_output["bytes"] >= len(_capture("sailfish_profile_banner.txt").strip())
        results = judge_connect([report])
    finally:
        close_all(sessions)
    assert [r.status for r in results] == ["pass", "pass"]
    note = results[1]
    assert note.is_note and note.hosts == (report.name,)
    assert "',---'" in note.summary and "rsync" in note.summary
    assert note.details["first_lines"] == {report.name: ",---"}


def _reached(name: str, shell_output: dict[str, object] | None = None) -> HostReport:
    connection: dict[str, object] = {"transport": "ssh", "probe_s": 1.0}
    if shell_output is not None:
        connection["shell_output"] = shell_output
    return HostReport(name=name, address=name, reachable=True, facts={"connection": connection})


def test_the_note_names_only_the_nodes_whose_shell_prints() -> None:
    motd = _capture("termux_desktop_motd.txt").decode()
    hosts = [
        _reached("node1"),
        _reached("node2", {"bytes": len(motd), "text": motd}),
        HostReport(name="node3", address="node3", reachable=False, error=HostError("timeout", "node3: late")),
    ]
    results = judge_connect(hosts)
    assert [(r.status, r.is_note) for r in results] == [("pass", False), ("pass", True), ("error", False)]
    assert results[1].hosts == ("node2",)
    assert results[1].details["first_lines"] == {"node2": _first_line(motd.encode())}
    assert results[1].details["bytes"] == {"node2": len(motd)}


def test_clean_shells_make_no_note() -> None:
    assert [r.status for r in judge_connect([_reached("node1"), _reached("node2")])] == ["pass"]
