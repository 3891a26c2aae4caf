"""Make a three-node H100 run in which the checks that the lab recordings and ``make_synthetic``
show passing (or only skipping) each find one fault; deterministic (same bytes every time).

Every node's facts are the recorded H100 facts of ``tests/data/runs/h100_node.json``; the job is
the recorded job ``tests/data/jobs/intranode_two_ranks.json``. The findings are not written by
hand: the real judges of ``checks/`` turn the facts, observations and the job into them, as in a
real run. Injected, one fault a check:

- hardware: node1's kernel log holds the recorded XID lines of
  ``tests/data/hardware/dmesg_xid62_45.txt``, read by the probe's own parser;
- environment: node3's ``NCCL_SOCKET_IFNAME`` is ``eth0`` where the others have ``ib0``;
- limits: node2's ``/dev/shm`` is 64 MiB, a container's default;
- names: node2 resolves its own name as the recorded sandbox of
  ``tests/data/names/gvisor_vm_own_name_loopback.json`` resolved its own (127.0.0.1);
- clocks: node3's clock is 2.5 s ahead of the others, and no time service keeps it in step;
- storage: the checkpoint directory ``/ckpt`` is read-only on node3;
- readings: every node's board and BIOS are those of the recorded Supermicro X10SRi-F of
  ``tests/data/facts/dmi_supermicro_x10sri.txt`` (BIOS 3.1 of 06/06/2018), node2's an older BIOS
  (2.0 of 12/17/2015);
- intranode: node2's ranks all-reduce among themselves at a fifth of their recorded busbw;
- baseline: compared with the four-node bandwidth run (``make_synthetic.small_bandwidth_run``),
  node4 is gone and the world's busbw is that of the recorded gloo job.

The tests call :func:`faults_run`.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from checks.allreduce import judge_allreduce
from checks.allreduce.phase import PHASE as ALLREDUCE_PHASE
from checks.baseline import compare
from checks.clocks import ClockSample, ClocksObservation, judge_clocks
from checks.clocks.settings import ClocksSection
from checks.compute.root_cause import refer_to_compute
from checks.connect import judge_connect
from checks.environment import judge_environment
from checks.environment.settings import MUST_MATCH
from checks.hardware import judge_hardware
from checks.intranode import judge_intranode
from checks.job.outcome import JobOutcome, NodeOutcome
from checks.limits import judge_limits
from checks.names import Answer, NamedNode, NamesObservation, judge_names
from checks.readings import judge_readings
from checks.storage import StorageObservation, judge_storage
from checks.storage.settings import StorageSection
from preflight.config import Config
from preflight.facts import TimeFacts
from preflight.model import CheckResult, HostReport, RunReport
from preflight.node.hardware import parse_xid_lines
from tests.data.reports.make_synthetic import small_bandwidth_run

DATA = Path(__file__).resolve().parents[1]
NAMES = ("node1", "node2", "node3")
ADDRESS = {name: f"10.0.0.{11 + i}" for i, name in enumerate(NAMES)}
GIB = 1 << 30
STARTED = 1_800_000_000.0
PREFIX = "/sys/class/dmi/id/"
DMI_KEYS = ("bios_vendor", "bios_version", "bios_date", "board_vendor", "board_name", "product_name")


def _dmi(name: str) -> dict[str, str]:
    lines = (DATA / "facts" / "dmi_supermicro_x10sri.txt").read_text().splitlines()
    found = dict(line.removeprefix(PREFIX).split(":", 1) for line in lines if line.startswith(PREFIX))
    dmi = {key: found[key] for key in DMI_KEYS}
    return {**dmi, "bios_version": "2.0", "bios_date": "12/17/2015"} if name == "node2" else dmi


def _facts() -> dict[str, dict[str, Any]]:
    template = json.loads((DATA / "runs" / "h100_node.json").read_text())
    xids = parse_xid_lines((DATA / "hardware" / "dmesg_xid62_45.txt").read_text())
    facts: dict[str, dict[str, Any]] = {}
    for i, name in enumerate(NAMES):
        node = copy.deepcopy(template)
        shm = 64 << 20 if name == "node2" else 256 * GIB
        node.update(
            hostname=name,
            env={"NCCL_SOCKET_IFNAME": "eth0" if name == "node3" else "ib0", "OMP_NUM_THREADS": "8"},
            shm={"path": "/dev/shm", "size_bytes": shm, "free_bytes": shm},
            limits={
                "memlock": {"soft": "unlimited", "hard": "unlimited"},
                "nofile": {"soft": 1 << 20, "hard": 1 << 20},
            },
            net={"interfaces": [{"name": "ib0", "addresses": [f"{ADDRESS[name]}/24"]}], "ib_devices": []},
            dmi=_dmi(name),
            hardware={
                "nvswitches": 0,
                "fabric_manager_running": False,
                "xid": {"readable": True, "events": xids if name == "node1" else []},
            },
            connection={
                "transport": "ssh",
                "user": "root",
                "port": 22,
                "python": node["python"]["executable"],
                "connect_s": 0.08 + 0.01 * i,
                "probe_s": 3.1 + 0.2 * i,
                "accepted_host_keys": [],
            },
        )
        facts[name] = node
    return facts


def _names() -> NamesObservation:
    recorded = json.loads((DATA / "names" / "gvisor_vm_own_name_loopback.json").read_text())
    own = recorded["answers"][recorded["hostname"]]
    names = {n: NamedNode(n, ADDRESS[n], (ADDRESS[n],)) for n in NAMES}
    answers = {asker: {n: Answer((ADDRESS[n],)) for n in NAMES} for asker in NAMES}
    answers["node2"]["node2"] = Answer(tuple(own["addresses"]))
    return NamesObservation(names, answers, master="node1")


def _clocks() -> ClocksObservation:
    offsets = {"node1": 0.0012, "node2": -0.0008, "node3": 2.5}
    samples = {n: ClockSample(STARTED, STARTED + 0.002, STARTED + 0.001 + o) for n, o in offsets.items()}
    synced = TimeFacts(synchronised=True, state="ok", services=("chronyd",))
    loose = TimeFacts(synchronised=False, state="unsynchronised", services=())
    return ClocksObservation(samples, time={n: loose if n == "node3" else synced for n in NAMES})


def _storage() -> StorageObservation:
    inspected: dict[str, Any] = {}
    for name in NAMES:
        writable = name != "node3"
        found: dict[str, Any] = {
            "role": "checkpoint",
            "exists": True,
            "kind": "dir",
            "writable": writable,
            "marker": f".preflight-r-{name}" if writable else None,
            "filesystem": {
                "type": "nfs4",
                "source": "nas:/ckpt",
                "fsid": "1",
                "network": True,
                "free_bytes": 12 << 40,
                "free_inodes": 10**8,
            },
        }
        if not writable:
            found["write_error"] = "Read-only file system"
        inspected[name] = {"/ckpt": found}
    markers = [f".preflight-r-{n}" for n in NAMES if n != "node3"]
    seen = {n: {"/ckpt": markers} for n in NAMES}
    return StorageObservation((), "/ckpt", inspected, seen, {m: m.rsplit("-", 1)[1] for m in markers})


def _job() -> JobOutcome:
    data = json.loads((DATA / "jobs" / "intranode_two_ranks.json").read_text())
    for record in data["document"]["intranode"]["ranks"]:
        if record["node_rank"] == 1:
            record["busbw_gbps"] /= 5
            record["time_s"] *= 5
    nodes = tuple(NodeOutcome(**n) for n in data["nodes"])
    return JobOutcome(**{**data, "phases": tuple(data["phases"]), "nodes": nodes})


def faults_run() -> RunReport:
    facts = _facts()
    hosts = [
        HostReport(name=n, address=ADDRESS[n], hostname=n, reachable=True, facts=facts[n]) for n in NAMES
    ]
    nodes = {h.name: h.node for h in hosts}
    config = Config()
    job = _job()
    intranode = judge_intranode(job, config)
    allreduce = refer_to_compute(
        judge_allreduce(job, config, {}), intranode, ALLREDUCE_PHASE.speed_keys, not_by=None
    )
    results: list[CheckResult] = [
        *judge_connect(hosts),
        *judge_hardware(nodes, config),
        *judge_readings(nodes),
        *judge_environment(nodes, {}, must_match=MUST_MATCH, addresses=ADDRESS),
        *judge_limits(nodes, config),
        *judge_names(_names()),
        *judge_clocks(_clocks(), config.section(ClocksSection)),
        *judge_storage(_storage(), StorageSection(checkpoint_dir="/ckpt")),
        *intranode,
        *allreduce,
        *compare(small_bandwidth_run(), hosts, allreduce, config),
    ]
    return RunReport.build(
        tool_version="0.1.0",
        started_at="2026-11-22T15:40:00Z",
        duration_s=job.duration_s + 6.0,
        hosts=hosts,
        results=results,
    )
