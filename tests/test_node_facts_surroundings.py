"""The facts every node reports about the job's surroundings: limits, /dev/shm, what NCCL reads
besides the environment (its configuration files, its network plugin), the clock's service and
the node's own name; parsers on recorded outputs, gatherers on fakes, the views over them."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from preflight.bundle import pack
from preflight.facts import NodeFacts
from preflight.node import masking, nccl, net, system

ROOT = Path(__file__).resolve().parents[1]
# What the controller sends a node to run the facts probe.
SCRIPT = pack("preflight.node.facts")
DATA = Path(__file__).resolve().parent / "data" / "facts"


def test_nccl_conf_is_read_as_nccl_reads_it() -> None:
    text = (
        "# written by the cluster's image\n"
        "NCCL_SOCKET_IFNAME==ens1f0\n"  # NCCL's own docs example: the value is "=ens1f0"
        "NCCL_DEBUG=WARN\n"
        "NCCL_DEBUG=INFO\n"  # setenv(..., 0): the first setting stays
        "NCCL_IB_HCA = mlx5_0\n"  # a name with a space: set, never read
        "no equals sign here\n"
        "NCCL_ALGO=Ring\r\n"  # a CRLF file keeps its carriage return in the value
    )
    settings, unread = nccl.parse_nccl_conf(text)
    assert settings == {"NCCL_SOCKET_IFNAME": "=ens1f0", "NCCL_DEBUG": "WARN", "NCCL_ALGO": "Ring\r"}
    assert unread == ["NCCL_IB_HCA "]


def test_the_loader_cache_is_read_from_a_recorded_ldconfig() -> None:
    cache = nccl.parse_ldconfig_cache((DATA / "ldconfig_p_debian12.txt").read_text())
    assert len(cache) == 565  # as its header says
    assert ("libz.so.1", "libc6,x86-64", "/lib/x86_64-linux-gnu/libz.so.1") in cache
    assert not [name for name, _, _ in cache if name.startswith("libnccl-net")]


@pytest.mark.parametrize(
    ("setting", "wanted"),
    [
        (None, ["libnccl-net.so"]),
        ("", ["libnccl-net.so"]),
        ("none", []),
        ("NONE", []),
        ("aws-ofi", ["aws-ofi", "libnccl-net-aws-ofi.so"]),
        (
            "/opt/plugin/libnccl-net.so",
            ["/opt/plugin/libnccl-net.so", "libnccl-net-/opt/plugin/libnccl-net.so.so"],
        ),
    ],
)
def test_the_plugin_nccl_tries_follows_nccl_net_plugin(setting: str | None, wanted: list[str]) -> None:
    assert nccl.nccl_plugin_names(setting) == wanted


def test_nccl_facts_find_the_conf_files_and_the_plugin_on_the_library_path(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".nccl.conf").write_text("NCCL_SOCKET_IFNAME=ib0\nNCCL_IB_PASSWORD=hunter2\n")
    libs = tmp_path / "plugins"
    libs.mkdir()
    (libs / "libnccl-net.so").write_bytes(b"\x7fELF")
    (libs / "libnccl-net-ofi.so").write_bytes(b"\x7fELF")
    found = nccl.nccl_facts({"LD_LIBRARY_PATH": f"/nonexistent:{libs}"}, str(home))
    user, system = found["conf_files"]
    assert user == {
        "role": "user",
        "path": str(home / ".nccl.conf"),
        "present": True,
        "settings": {"NCCL_SOCKET_IFNAME": "ib0", "NCCL_IB_PASSWORD": "***"},
        "unread": [],
    }
    assert system["path"] == "/etc/nccl.conf"
    assert [p["name"] for p in found["net_plugins"]] == ["libnccl-net-ofi.so", "libnccl-net.so"]
    assert found["net_plugin"] == str(libs / "libnccl-net.so")
    # NCCL_CONF_FILE replaces ~/.nccl.conf; NCCL_NET_PLUGIN picks the suffixed library.
    other = tmp_path / "job.conf"
    other.write_text("NCCL_DEBUG=INFO\n")
    chosen = nccl.nccl_facts(
        {"LD_LIBRARY_PATH": str(libs), "NCCL_CONF_FILE": str(other), "NCCL_NET_PLUGIN": "ofi"}, str(home)
    )
    assert chosen["conf_files"][0]["path"] == str(other)
    assert chosen["conf_files"][0]["settings"] == {"NCCL_DEBUG": "INFO"}
    assert chosen["net_plugin"] == str(libs / "libnccl-net-ofi.so")
    assert nccl.nccl_facts({"NCCL_NET_PLUGIN": "none"}, None)["net_plugin"] is None


def test_time_services_are_named_from_process_names() -> None:
    comms = ["bash", "systemd-timesyn", "chronyd\n", "sshd", "chronyd"]
    assert system.time_services(comms) == ["chronyd", "systemd-timesyncd"]


def test_an_unresolvable_name_says_why_and_a_resolvable_one_lists_addresses() -> None:
    assert net.resolve_name("localhost")["addresses"][0] in ("127.0.0.1", "::1")
    failed = net.resolve_name("no-such-host.invalid")
    assert "addresses" not in failed and failed["error"]


def test_a_lookup_that_hangs_is_cut_at_its_timeout(monkeypatch: pytest.MonkeyPatch) -> None:
    def hang(*args: object, **kwargs: object) -> None:
        threading.Event().wait(2)
        raise OSError("a resolver that answers too late")

    monkeypatch.setattr(socket, "getaddrinfo", hang)
    assert net.resolve_name("gpu01", timeout_s=0.2) == {"name": "gpu01", "error": "no answer within 0.2 s"}


def run_probe(*args: str, env: dict[str, str] | None = None) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-", *args],
        input=SCRIPT,
        capture_output=True,
        timeout=120,
        env=env,
        check=True,
    ).stdout
    document: dict[str, object] = json.loads(out)["facts"]
    return document


def test_the_script_reports_the_surroundings_and_compares_secrets_by_digest_only() -> None:
    env = dict(os.environ, NCCL_IB_TOKEN="tok-do-not-leak", FI_PROVIDER="efa", LD_PRELOAD="")
    options = json.dumps({"salt": "0123", "job_env": {"NCCL_NET_PLUGIN": "none", "HF_TOKEN": "x"}})
    found = run_probe(options, env=env)
    assert "do-not-leak" not in json.dumps(found)
    node = NodeFacts(found)
    assert node.env["NCCL_IB_TOKEN"] == "***" and node.env["FI_PROVIDER"] == "efa"
    assert node.env_secret_digests["NCCL_IB_TOKEN"] == masking.secret_digest("0123", "tok-do-not-leak")
    assert node.limits["nofile"].soft is not None and node.limits["nofile"].soft > 0
    assert node.shm is not None and node.shm.size_bytes > 0
    assert node.nccl is not None and node.nccl.net_plugin_wanted == ()  # the job's "none" applied
    assert node.time is not None and isinstance(node.time.synchronised, bool)
    assert node.name_resolution is not None and node.name_resolution.name == socket.gethostname()


def test_views_read_missing_or_ill_typed_surroundings_as_absent() -> None:
    node = NodeFacts(
        {
            "limits": {
                "memlock": {"soft": "unlimited", "hard": "unlimited"},
                "nofile": {"soft": "x"},
                "bad": 3,
            },
            "shm": {"size_bytes": "big"},
            "nccl": ["not", "a", "mapping"],
            "time": {"synchronised": "yes", "services": "chronyd"},
            "name_resolution": {"addresses": ["10.0.0.1"]},
        }
    )
    assert node.limits["memlock"].soft is None and node.limits["memlock"].hard is None  # unlimited
    assert "nofile" not in node.limits and "bad" not in node.limits  # ill-typed is not unlimited
    assert node.shm is None and node.nccl is None and node.name_resolution is None
    assert node.time is not None and node.time.synchronised is None and node.time.services == ()
