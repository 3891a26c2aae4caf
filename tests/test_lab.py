"""The lab cluster is real: its nodes answer SSH as separate machines, and its faults bite.
These tests use the OpenSSH client and plain sockets, never preflight itself."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.lab import NODE_PYTHON, LabCluster, LabError, LabNode, MakeLab, cleanup_stale, derive_env

pytestmark = pytest.mark.lab

# Connects to ADDRESS:PORT from inside a node; prints how it went.
PROBE = """
import socket, sys
try:
    socket.create_connection((sys.argv[1], int(sys.argv[2])), timeout=float(sys.argv[3])).close()
    print("ok")
except TimeoutError:
    print("timeout")
except ConnectionRefusedError:
    print("refused")
except OSError as exc:
    print("error", exc.errno)
"""

# A sink on port 5201 that acknowledges each transfer once it has read all of it.
SINK = """
import socket
server = socket.create_server(("0.0.0.0", 5201))
while True:
    conn, _ = server.accept()
    with conn:
        while conn.recv(1 << 16):
            pass
        conn.sendall(b"k")
"""

# Sends N bytes to ADDRESS:5201; prints the seconds until the sink acknowledged them.
SEND = """
import socket, sys, time
with socket.create_connection((sys.argv[1], 5201), timeout=30) as sock:
    start = time.perf_counter()
    sock.sendall(bytes(int(sys.argv[2])))
    sock.shutdown(socket.SHUT_WR)
    assert sock.recv(1) == b"k"
    print(time.perf_counter() - start)
"""

TRANSFER_BYTES = 500_000  # 0.5 s at 8 mbit
CAPPED_MIN_S = TRANSFER_BYTES * 8 / 8e6 / 2  # shaped to 8 mbit, it cannot go at twice that


def ssh(lab: LabCluster, node: int | str, command: str, timeout_s: float = 20) -> str:
    result = subprocess.run(
        lab.ssh_argv(node, [command]), capture_output=True, timeout=timeout_s, check=False
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    return result.stdout.decode()


def probe(lab: LabCluster, src: int | str, address: str, port: int, timeout_s: float = 1) -> str:
    argv = [NODE_PYTHON, "-c", PROBE, address, str(port), str(timeout_s)]
    return lab.exec(src, argv).stdout.decode().strip()


def transfer_s(lab: LabCluster, src: int, dst: int) -> float:
    argv = [NODE_PYTHON, "-c", SEND, lab.node(dst).address, str(TRANSFER_BYTES)]
    return float(lab.exec(src, argv).stdout)


def start_sinks(lab: LabCluster) -> None:
    for node in lab.nodes:
        lab.spawn(node, [NODE_PYTHON, "-c", SINK])
    for node in lab.nodes:
        deadline = time.monotonic() + 10
        while probe(lab, 1, node.address, 5201) != "ok":
            assert time.monotonic() < deadline, f"sink on {node.name} never listened"
            time.sleep(0.05)


def test_nodes_answer_ssh_as_separate_machines(make_lab: MakeLab) -> None:
    lab = make_lab(3)
    for node in lab.nodes:
        assert ssh(lab, node.index, "hostname").strip() == node.name
        # names resolve inside the lab, as on a real cluster
        assert ssh(lab, node.index, "getent hosts node3").split()[0] == lab.node(3).address
    host_keys = [line.split()[2] for line in lab.known_hosts_path.read_text().splitlines()]
    assert len(set(host_keys)) == 3
    assert lab.exec(2, ["hostname"]).stdout.decode().strip() == "node2"


def test_hosts_file_and_lookup(make_lab: MakeLab, tmp_path: Path) -> None:
    lab = make_lab(2)
    hosts = lab.hosts_file(tmp_path / "hosts", extra_lines=["# end"])
    assert hosts.read_text().splitlines() == [
        f"root@{lab.nodes[0].address}",
        f"root@{lab.nodes[1].address}",
        "# end",
    ]
    assert lab.node("node2") is lab.node(2) is lab.node(lab.nodes[1].address)
    with pytest.raises(KeyError):
        lab.node(3)


def test_node_env_is_its_own(make_lab: MakeLab, tmp_path: Path) -> None:
    drifted = derive_env(
        tmp_path / "drifted",
        Path(sys.prefix),
        packages={"torch": "2.0.0", "pflab-extra": "1.2.3"},
        hide=["psutil"],
    )
    lab = make_lab(2, node_envs={2: drifted})
    script = (
        "import importlib.metadata as m, importlib.util as u, json; "
        "print(json.dumps([m.version('torch'), "
        "[d.metadata['Name'] for d in m.distributions()].count('pflab-extra'), "
        "u.find_spec('psutil') is not None, u.find_spec('paramiko') is not None]))"
    )
    command = f'{NODE_PYTHON} -c "{script}"'
    torch_version, extra, has_psutil, has_paramiko = json.loads(ssh(lab, 1, command))
    assert (extra, has_psutil, has_paramiko) == (0, True, True)
    assert torch_version != "2.0.0"
    assert json.loads(ssh(lab, 2, command)) == ["2.0.0", 1, False, True]


def test_each_node_has_a_private_tmp(make_lab: MakeLab) -> None:
    lab = make_lab(2)
    ssh(lab, 1, "touch /tmp/pflab-leftover")
    assert lab.tmp_entries(1) == ["pflab-leftover"]
    assert lab.tmp_entries(2) == []
    assert not Path("/tmp/pflab-leftover").exists()


def test_block_port_drop_and_reject(make_lab: MakeLab) -> None:
    lab = make_lab(3)
    target = lab.node(2).address
    assert probe(lab, 1, target, 22) == "ok"
    lab.block_port(2, 22, action="drop")
    assert probe(lab, 1, target, 22) == "timeout"
    lab.unblock_ports(2)
    lab.block_port(2, 22, action="reject")
    assert probe(lab, 1, target, 22) == "refused"
    lab.unblock_ports(2)
    lab.block_port(2, 22, from_node=3)
    assert probe(lab, 1, target, 22) == "ok"
    assert probe(lab, 3, target, 22) == "timeout"
    lab.unblock_ports(2)
    assert probe(lab, 3, target, 22) == "ok"


def test_cut_and_restore(make_lab: MakeLab) -> None:
    lab = make_lab(2)
    lab.cut(2)
    assert probe(lab, 1, lab.node(2).address, 22) in ("timeout", "error 113")
    result = subprocess.run(lab.ssh_argv(2, ["true"], connect_timeout_s=1), capture_output=True, timeout=20)
    assert result.returncode == 255
    lab.restore(2)
    assert ssh(lab, 2, "hostname").strip() == "node2"


def test_unused_address_answers_nothing(make_lab: MakeLab) -> None:
    lab = make_lab(1)
    assert probe(lab, 1, lab.unused_address(), 22, timeout_s=0.5) in ("timeout", "error 113")


def test_stop_and_start_sshd(make_lab: MakeLab) -> None:
    lab = make_lab(1)
    lab.stop_sshd(1)
    assert probe(lab, 1, lab.node(1).address, 22) == "refused"
    assert lab.exec(1, ["hostname"]).stdout.strip() == b"node1"  # the node itself lives on
    lab.start_sshd(1)
    assert ssh(lab, 1, "hostname").strip() == "node1"


def test_processes_shows_what_runs_in_a_node(make_lab: MakeLab) -> None:
    lab = make_lab(1)
    assert lab.processes(1) == []
    sleeper = lab.spawn(1, ["sleep", "300"])
    assert [cmd for _, cmd in lab.processes(1)] == ["sleep 300"]
    sleeper.kill()
    sleeper.wait()
    assert lab.processes(1) == []


def test_a_cpu_quota_holds_what_the_nodes_sshd_starts_and_names_what_escapes_it(make_lab: MakeLab) -> None:
    lab = make_lab(1)
    lab.limit_cpu(1, 0.5)
    session = subprocess.Popen(
        lab.ssh_argv(1, ["sleep 300"]), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
    )
    outside = lab.spawn(1, ["sleep", "301"])  # started beside sshd, not by it
    try:
        deadline = time.monotonic() + 10
        while not any(cmd == "sleep 300" for _, cmd in lab.processes(1)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert any(cmd == "sleep 300" for _, cmd in lab.processes(1))
        assert [cmd for _, cmd, _ in lab.outside_cpu_limit(1)] == ["sleep 301"]
    finally:
        for process in (session, outside):
            process.kill()
            process.wait()


def test_throttle_slows_the_nodes_link(make_lab: MakeLab) -> None:
    lab = make_lab(3)
    start_sinks(lab)
    free = transfer_s(lab, 1, 2)
    lab.throttle(2, 8)
    slow_in, slow_out = transfer_s(lab, 1, 2), transfer_s(lab, 2, 1)
    assert min(slow_in, slow_out) > max(10 * free, CAPPED_MIN_S)
    assert transfer_s(lab, 1, 3) < slow_in / 10  # other links are untouched
    lab.unthrottle(2)
    assert transfer_s(lab, 1, 2) < slow_in / 10


def test_throttle_link_slows_only_that_pair(make_lab: MakeLab) -> None:
    lab = make_lab(3)
    start_sinks(lab)
    free = transfer_s(lab, 1, 2)
    lab.throttle_link(1, 2, 8)
    slow_there, slow_back = transfer_s(lab, 1, 2), transfer_s(lab, 2, 1)
    assert min(slow_there, slow_back) > max(10 * free, CAPPED_MIN_S)
    assert transfer_s(lab, 1, 3) < slow_there / 10
    assert transfer_s(lab, 3, 2) < slow_there / 10
    lab.unthrottle(1)
    assert transfer_s(lab, 2, 1) < slow_there / 10


def _leftovers(index: int) -> list[str]:
    """Every trace of lab `index` on this machine."""
    netns = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    rules = subprocess.run(["iptables", "-w", "-S"], capture_output=True, text=True).stdout
    found = [line for line in netns.splitlines() if line.startswith(f"pflab{index}n")]
    found += [line for line in links.splitlines() if re.search(rf" pflab{index}(v\d+)?[:@]", line)]
    found += [line for line in rules.splitlines() if re.search(rf"--comment pflab{index}\b", line)]
    for proc in Path("/proc").iterdir():
        cmdline = proc / "cmdline"
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "/var/tmp/pflab/lab" in text and f"lab{index}-" in text:
            found.append(text)
    return found


def _gone_or_zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0] == "Z"
    except OSError:
        return True


def test_stop_leaves_nothing_behind(make_lab: MakeLab) -> None:
    lab = make_lab(2)
    ssh(lab, 1, "sleep 60 >/dev/null 2>&1 &")  # a stray process outlives its session
    strays = [pid for pid, cmdline in lab.processes(1) if cmdline == "sleep 60"]
    index, root = lab.index, lab.root
    assert strays
    assert _leftovers(index)
    lab.stop()
    lab.stop()  # idempotent
    assert _leftovers(index) == []
    assert all(_gone_or_zombie(pid) for pid in strays)
    assert not root.exists()
    assert not Path(f"/var/tmp/pflab/claims/{index}.json").exists()


def test_cleanup_stale_removes_a_dead_owners_lab(tmp_path: Path) -> None:
    script = (
        "import sys, time; from pathlib import Path; from tests.lab import LabCluster; "
        "lab = LabCluster(1, env=Path(sys.prefix)).start(); print(lab.index, flush=True); "
        "time.sleep(60)"
    )
    owner = subprocess.Popen(
        [sys.executable, "-c", script], stdout=subprocess.PIPE, cwd=Path(__file__).parent.parent
    )
    try:
        assert owner.stdout is not None
        index = int(owner.stdout.readline())
    finally:
        owner.kill()  # SIGKILL: no chance to clean up
        owner.wait()
        if owner.stdout is not None:
            owner.stdout.close()
    assert _leftovers(index)
    cleanup_stale()  # (a lab starting in a parallel test process may have done it already)
    assert _leftovers(index) == []


class _BrokenSshdLab(LabCluster):
    def _sshd_config(self, node: LabNode, host_key: Path) -> str:
        return "NoSuchOption yes\n"


def test_failed_start_reports_sshd_stderr_and_cleans_up() -> None:
    lab = _BrokenSshdLab(2, env=Path(sys.prefix))
    with pytest.raises(LabError, match="NoSuchOption") as failure:
        lab.start()
    index = int(re.findall(r"/lab(\d+)-", str(failure.value))[0])
    assert _leftovers(index) == []
    assert lab.nodes[0].sshd is None
    lab.stop()


def test_labs_side_by_side_do_not_collide(make_lab: MakeLab) -> None:
    first, second = make_lab(1), make_lab(1)
    assert first.index != second.index
    assert first.bridge != second.bridge
    assert first.node(1).address != second.node(1).address
    assert ssh(first, 1, "hostname") == ssh(second, 1, "hostname") == "node1\n"
