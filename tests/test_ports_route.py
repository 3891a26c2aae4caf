"""The route to the master where the node has no ``ip`` command (containers and minimal images lack
iproute2): found through the kernel instead, and never a failure for want of the tool. The false
alarm this guards against was seen on a real H100 machine (tests/data/gpu_h100_580, SOURCES.md)."""

from __future__ import annotations

import errno
import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from checks.ports import PortsObservation, judge_ports
from checks.ports import node as ports_node
from checks.ports.details import NodeReport

REAL_RUN = Path(__file__).parent / "data" / "gpu_h100_580" / "check_every_gpu.json"
# What that run's ports check said: the node had no iproute2.
RECORDED_ERROR = "no route to 127.0.0.1: [Errno 2] No such file or directory: 'ip'"


def _lo_mtu() -> int | None:
    try:
        return int(Path("/sys/class/net/lo/mtu").read_text().strip())
    except (OSError, ValueError):
        return None


@pytest.fixture
def no_ip(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A node without ``ip``: nothing on PATH, nothing in the sbin directories either; and ``ip``
    never run."""
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ports_node, "IP_FALLBACK_PATHS", ())
    real_run = subprocess.run

    def run(argv: Any, *args: Any, **kwargs: Any) -> Any:
        assert os.path.basename(str(argv[0])) != "ip", "ip was run"
        return real_run(argv, *args, **kwargs)

    monkeypatch.setattr(subprocess, "run", run)


def observation(route: dict[str, Any], *, nodes: dict[str, NodeReport] | None = None) -> PortsObservation:
    """The one-node run of the real machine (localhost, rendezvous port 29500 listening), with
    ``route`` as its route to the master."""
    found = nodes or {"localhost": {"listening": {"29500": "ok"}, "ephemeral": 37777}}
    return PortsObservation(
        master="localhost",
        master_address="localhost",
        port=29500,
        extra_ports=(),
        nodes={name: {**report, "route": route} for name, report in found.items()},  # type: ignore[typeddict-item]
        probes=[],
    )


def test_without_ip_the_route_to_localhost_is_found_through_the_kernel(no_ip: None) -> None:
    assert ports_node._ip_command() is None
    route = ports_node.route_to("127.0.0.1")
    assert route == {
        "master": "127.0.0.1",
        "address": "127.0.0.1",
        "src": "127.0.0.1",
        "local": True,
        "dev": "lo",
        "mtu": _lo_mtu(),
    }
    (result,) = judge_ports(observation(route))
    assert result.status == "pass"
    assert result.summary == "port 29500 open on localhost"


def test_an_ip_that_fails_to_run_is_passed_over_for_the_kernel(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An iproute2 too old for ``-j`` (or one that cannot run) is no route missing."""
    fake = tmp_path / "ip"
    fake.write_text('#!/bin/sh\necho \'Option "-j" is unknown, try "ip -help".\' >&2\nexit 255\n')
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ports_node, "IP_FALLBACK_PATHS", ())
    assert ports_node._ip_command() == str(fake)
    route = ports_node.route_to("localhost")
    assert route == {
        "master": "localhost",
        "address": "127.0.0.1",
        "src": "127.0.0.1",
        "local": True,
        "dev": "lo",
        "mtu": _lo_mtu(),
    }


@pytest.mark.skipif(ports_node._ip_command() is None, reason="no ip command here")
@pytest.mark.parametrize("address", ["127.0.0.1", "::1", "198.51.100.7"])
def test_with_and_without_ip_the_route_is_the_same(
    address: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Where ``ip`` names a route, the kernel's choice without it names the same source address,
    interface and MTU (198.51.100.7, a documentation address: off this machine, through its
    default route where it has one)."""
    with_ip = ports_node.route_to(address)
    if "error" in with_ip:
        pytest.skip(f"no route here: {with_ip['error']}")
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(ports_node, "IP_FALLBACK_PATHS", ())
    assert ports_node.route_to(address) == with_ip


def test_no_route_at_all_is_still_a_failure(no_ip: None, monkeypatch: pytest.MonkeyPatch) -> None:
    def unreachable(*args: Any) -> dict[str, Any]:
        raise OSError(errno.ENETUNREACH, "Network is unreachable")

    monkeypatch.setattr(ports_node, "_route_by_socket", unreachable)
    route = ports_node.route_to("127.0.0.1")
    assert route == {
        "master": "127.0.0.1",
        "address": "127.0.0.1",
        "error": "no route to 127.0.0.1: Network is unreachable",
    }
    findings = judge_ports(observation(route))
    (failed,) = [f for f in findings if f.status == "fail"]
    assert failed.summary == "localhost: no route to 127.0.0.1: Network is unreachable"
    assert failed.details["item"] == "route"


def test_a_route_that_cannot_be_determined_is_a_note(no_ip: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ``ip``, and a UDP socket refused too (a sandbox's seccomp filter): nothing is known of
    the route, which says nothing against the node."""

    def refused(*args: Any) -> dict[str, Any]:
        raise PermissionError(errno.EPERM, "Operation not permitted")

    monkeypatch.setattr(ports_node, "_route_by_socket", refused)
    route = ports_node.route_to("127.0.0.1")
    assert route == {
        "master": "127.0.0.1",
        "address": "127.0.0.1",
        "undetermined": "route not determined: no `ip` command (Operation not permitted)",
    }
    passed, note = judge_ports(observation(route))
    assert passed.status == "pass" and not passed.is_note
    assert note.is_note and note.hosts == ("localhost",)
    assert note.summary == "localhost: route not determined: no `ip` command (Operation not permitted)"
    assert note.details["item"] == "route"


def test_the_real_machines_false_alarm_is_gone(no_ip: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The recorded run failed ``ports`` on a healthy one-GPU machine for want of ``ip``. Judged
    again with its own listeners and ephemeral port: with the route the node finds now without
    ``ip`` it passes; with a route the node could not determine at all, it passes with a note."""
    report = json.loads(REAL_RUN.read_text(encoding="utf-8"))
    (ports,) = [r for r in report["results"] if r["check"] == "ports"]
    assert ports["status"] == "fail"
    recorded: dict[str, NodeReport] = ports["details"]["nodes"]
    assert recorded["localhost"]["route"]["error"] == RECORDED_ERROR
    nodes: dict[str, NodeReport] = {
        name: {k: v for k, v in node.items() if k != "route"}  # type: ignore[misc]
        for name, node in recorded.items()
    }

    found = ports_node.route_to(ports["details"]["master_address"])
    assert "error" not in found and found["dev"] == "lo"
    assert [r.status for r in judge_ports(observation(found, nodes=nodes))] == ["pass"]

    def refused(*args: Any) -> dict[str, Any]:
        raise OSError(errno.EACCES, "Permission denied")

    monkeypatch.setattr(ports_node, "_route_by_socket", refused)
    undetermined = ports_node.route_to(ports["details"]["master_address"])
    findings = judge_ports(observation(undetermined, nodes=nodes))
    assert not [f for f in findings if f.status in ("fail", "error", "warn")]
    assert [f.is_note for f in findings] == [False, True]
    assert findings[1].summary == "localhost: route not determined: no `ip` command (Permission denied)"
