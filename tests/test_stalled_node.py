"""A phase that timed out names the node that stalled it, from the heartbeats' evidence, not the
rank that reported the timeout; the network counters the heartbeats carry are read as the kernel
and ``ss`` write them."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from checks.job.node.netstat import NETSTAT_FIELDS, SNMP_FIELDS, parse_proc_table, parse_ss
from checks.job.outcome import JobOutcome
from checks.job.phase import read_phase
from checks.job.stalled_node import _by_retransmits, read_progress, stalled_node, with_loss_cause
from preflight.model import CheckResult
from tests.test_allreduce import load_job

NET = Path(__file__).parent / "data" / "net"


def test_a_node_stopped_mid_phase_is_named_not_rank_0_that_timed_out() -> None:
    # A real run: node2's ranks stopped (SIGSTOP) 0.3 s into the all-reduce phase for 12 s; a
    # rank on another node timed out after 6 s waiting for them.
    job = load_job("stalled_mid_job")
    (error,) = job.document["phase_errors"]["allreduce"]  # type: ignore[index]
    assert error["rank"] == 0 and "Timed out waiting 6000ms" in error["message"]
    stalled = stalled_node(job, "allreduce")
    assert stalled is not None and (stalled.host, stalled.by) == ("node2", "progress")
    assert stalled.evidence.startswith("progress: ranks 2, 3 on node2 had sent no heartbeat for")
    (finding,) = read_phase("allreduce", job).findings
    assert (finding.status, finding.hosts) == ("fail", ("node2",))
    assert finding.summary.startswith("node2 stalled the allreduce phase (progress: ranks 2, 3 on node2")
    assert "on node2 timed out waiting" not in finding.summary
    assert finding.details["attribution"]["by"] == "progress"
    assert finding.details["item"] == "stalled_by_node"


def test_the_phase_the_stalled_job_passed_names_nobody() -> None:
    job = load_job("stalled_mid_job")
    assert stalled_node(job, "intranode") is None
    assert read_phase("intranode", job).findings == []


def _beats(rank: int, phase: str, rows: list[tuple[float, int, bool, bool]]) -> list[dict[str, Any]]:
    return [
        {"rank": rank, "phase": phase, "t": t, "ops": ops, "done": done, "failed": failed}
        for t, ops, done, failed in rows
    ]


def _with_progress(job: JobOutcome, progress: dict[str, dict[str, Any]]) -> JobOutcome:
    nodes = tuple(dataclasses.replace(n, progress=progress.get(n.host, {})) for n in job.nodes)
    return dataclasses.replace(job, nodes=nodes)


def _stderr(beats: list[dict[str, Any]]) -> str:
    import json

    return "".join(f"PREFLIGHT-JOB-BEAT {json.dumps(b)}\n" for b in beats)


def test_the_heartbeats_are_kept_as_records_with_named_fields() -> None:
    beats = _beats(3, "allreduce", [(100.0, 4, False, False), (102.0, 9, True, False)])
    beats.append(_net(103.5, "10.0.0.1", {"10.0.0.2": 7}) | {"rank": 3, "ops": 9, "done": True})
    progress = read_progress(_stderr(beats))
    assert progress["allreduce"]["ranks"] == {
        "3": [
            {"t": 100.0, "ops": 4, "done": False, "failed": False},
            {"t": 102.0, "ops": 9, "done": True, "failed": False},
            {"t": 103.5, "ops": 9, "done": True, "failed": False},
        ]
    }
    (sample,) = progress["allreduce"]["net"]
    assert sample["t"] == 103.5 and sample["net"]["peers"] == {"10.0.0.2": {"retrans": 7}}
    # The recorded jobs keep the same shape (what the launcher stored, read back from JSON).
    for node in load_job("stalled_mid_job").nodes:
        for seen in node.progress.values():
            for kept in seen["ranks"].values():
                assert all(set(beat) == {"t", "ops", "done", "failed"} for beat in kept)
            assert all(set(sample) == {"t", "net"} for sample in seen["net"])


def test_ranks_behind_the_others_on_one_node_are_named_by_their_collectives() -> None:
    # Built from the beats' form: node2's two ranks still beat, but had completed 3 of the inside
    # phase's all-reduces when the other nodes' ranks had done all 16 (a slow loopback).
    fast = [(100.0, 4, False, False), (102.0, 16, True, False), (121.0, 16, False, True)]
    slow = [(100.0, 1, False, False), (102.0, 2, False, False), (120.9, 3, False, False)]
    progress = {
        "node1": read_progress(_stderr(_beats(0, "intranode", fast) + _beats(1, "intranode", fast))),
        "node2": read_progress(_stderr(_beats(2, "intranode", slow) + _beats(3, "intranode", slow))),
        "node3": read_progress(_stderr(_beats(4, "intranode", fast) + _beats(5, "intranode", fast))),
    }
    job = _with_progress(load_job("intranode_two_ranks"), progress)
    stalled = stalled_node(job, "intranode")
    assert stalled is not None and stalled.host == "node2"
    assert stalled.evidence == (
        "progress: ranks 2, 3 on node2 had completed 3 collectives of the phase when the others had 16"
    )


def test_ranks_that_keep_pace_name_nobody() -> None:
    even = [(100.0, 4, False, False), (102.0, 9, False, False), (121.0, 9, False, True)]
    progress = {
        f"node{n + 1}": read_progress(
            _stderr(_beats(2 * n, "allreduce", even) + _beats(2 * n + 1, "allreduce", even))
        )
        for n in range(3)
    }
    assert stalled_node(_with_progress(load_job("intranode_two_ranks"), progress), "allreduce") is None


def _net(t: float, local: str, peers: dict[str, int]) -> dict[str, Any]:
    sample = {"counters": {}, "local": [local], "peers": {a: {"retrans": n} for a, n in peers.items()}}
    return {"rank": 0, "phase": "allreduce", "t": t, "ops": 1, "done": False, "failed": False, "net": sample}


def test_the_node_on_whose_connections_the_retransmissions_were_is_named() -> None:
    # Built from the beats' form: 10.0.0.3 drops a tenth of what it receives; everyone
    # retransmits to it, and it retransmits to everyone (its acknowledgements are lost too).
    before = {"10.0.0.1": {"10.0.0.2": 0, "10.0.0.3": 5}, "10.0.0.2": {"10.0.0.1": 0, "10.0.0.3": 4}}
    after = {"10.0.0.1": {"10.0.0.2": 1, "10.0.0.3": 90}, "10.0.0.2": {"10.0.0.1": 0, "10.0.0.3": 70}}
    before["10.0.0.3"] = {"10.0.0.1": 2, "10.0.0.2": 2}
    after["10.0.0.3"] = {"10.0.0.1": 40, "10.0.0.2": 35}
    progress = {
        f"node{i}": read_progress(_stderr([_net(100.0, a, before[a]), _net(110.0, a, after[a])]))
        for i, a in enumerate(sorted(before), start=1)
    }
    stalled = stalled_node(_with_progress(load_job("three_nodes"), progress), "allreduce")
    assert stalled is not None and (stalled.host, stalled.by) == ("node3", "retransmits")
    assert stalled.evidence.startswith(
        "retransmits: 222 of the phase's 223 TCP retransmissions were on node3's"
    )


def test_a_single_bad_link_names_no_node() -> None:
    before = {"10.0.0.1": {"10.0.0.2": 0}, "10.0.0.2": {"10.0.0.1": 0}, "10.0.0.3": {"10.0.0.1": 0}}
    after = {"10.0.0.1": {"10.0.0.2": 60}, "10.0.0.2": {"10.0.0.1": 50}, "10.0.0.3": {"10.0.0.1": 0}}
    progress = {
        f"node{i}": read_progress(_stderr([_net(100.0, a, before[a]), _net(110.0, a, after[a])]))
        for i, a in enumerate(sorted(before), start=1)
    }
    assert stalled_node(_with_progress(load_job("three_nodes"), progress), "allreduce") is None


# --------------------------------------------------------------------------- the node's counters


def test_the_kernel_tcp_counters_are_read_from_a_real_proc_net() -> None:
    snmp = (NET / "snmp.txt").read_text()
    counters = parse_proc_table(snmp, SNMP_FIELDS)
    names, values = [line.split()[1:] for line in snmp.splitlines() if line.startswith("Tcp:")]
    assert counters["Tcp.RetransSegs"] == int(values[names.index("RetransSegs")])
    assert set(counters) == {f"Tcp.{f}" for f in SNMP_FIELDS["Tcp"]}
    netstat = parse_proc_table((NET / "netstat.txt").read_text(), NETSTAT_FIELDS)
    assert {"TcpExt.TCPLostRetransmit", "TcpExt.TCPTimeouts"} <= set(netstat)


def test_per_peer_bytes_and_retransmissions_are_read_from_real_ss_output() -> None:
    peers, local = parse_ss((NET / "ss_tin.txt").read_text())
    assert local == ["10.199.1.1"]
    assert sorted(peers) == ["10.199.1.11", "10.199.1.12", "10.199.1.13"]
    assert peers["10.199.1.13"] == {"retrans": 0, "bytes_sent": 94584, "bytes_received": 9849}


def test_a_slow_link_whose_retransmissions_are_one_nodes_is_that_nodes_loss() -> None:
    # The pair judge saw node2-node3 slow in its test and re-test; the retransmissions of the
    # phase were nearly all on node3's connections (built from the beats' form, as above).
    before = {"10.0.0.1": {"10.0.0.3": 5}, "10.0.0.2": {"10.0.0.3": 4}, "10.0.0.3": {"10.0.0.1": 2}}
    after = {"10.0.0.1": {"10.0.0.3": 60}, "10.0.0.2": {"10.0.0.3": 70}, "10.0.0.3": {"10.0.0.1": 40}}
    progress = {
        f"node{i}": read_progress(_stderr([_net(100.0, a, before[a]), _net(110.0, a, after[a])]))
        for i, a in enumerate(sorted(before), start=1)
    }
    job = _with_progress(load_job("three_nodes"), progress)
    link = CheckResult(
        "allreduce",
        "fail",
        "the link node2-node3 runs at 0.16x",
        ("node2", "node3"),
        {"link": ["node2", "node3"]},
    )
    named = with_loss_cause(link, job, "allreduce")
    assert named.hosts == ("node3",)
    assert named.summary.startswith(
        "node3 loses traffic (retransmits: 159 of the phase's 159 TCP retransmissions"
    )
    assert named.summary.endswith("): the link node2-node3 runs at 0.16x")
    assert named.details["attribution"]["by"] == "retransmits"
    # Without the counters (a recording from before them), the finding stands as it was.
    assert with_loss_cause(link, load_job("three_nodes"), "allreduce") == link


def test_a_handful_of_retransmissions_or_a_cut_between_groups_keeps_the_finding() -> None:
    # A shaper on a slow route drops a few segments wherever its bursts land: 5 retransmissions,
    # all on node3's connections, do not make node3 the cause of a phase that completed.
    before = {"10.0.0.1": {"10.0.0.3": 0}, "10.0.0.2": {"10.0.0.3": 0}, "10.0.0.3": {"10.0.0.1": 0}}
    after = {"10.0.0.1": {"10.0.0.3": 2}, "10.0.0.2": {"10.0.0.3": 2}, "10.0.0.3": {"10.0.0.1": 1}}
    progress = {
        f"node{i}": read_progress(_stderr([_net(100.0, a, before[a]), _net(110.0, a, after[a])]))
        for i, a in enumerate(sorted(before), start=1)
    }
    job = _with_progress(load_job("three_nodes"), progress)
    link = CheckResult("allreduce", "fail", "the link node2-node3 runs at 0.16x", ("node2", "node3"), {})
    assert with_loss_cause(link, job, "allreduce") == link
    # Many retransmissions on node3, but the finding is about two groups: their route is the cause.
    many = {a: {p: n * 40 for p, n in peers.items()} for a, peers in after.items()}
    progress = {
        f"node{i}": read_progress(_stderr([_net(100.0, a, before[a]), _net(110.0, a, many[a])]))
        for i, a in enumerate(sorted(before), start=1)
    }
    job = _with_progress(load_job("three_nodes"), progress)
    cut = CheckResult(
        "allreduce",
        "fail",
        "traffic between node1 and node2, node3 is slow",
        ("node1", "node2", "node3"),
        {"groups": [["node1"], ["node2", "node3"]]},
    )
    assert with_loss_cause(cut, job, "allreduce") == cut
    # The same counters under a slow-link finding name node3.
    assert with_loss_cause(link, job, "allreduce").hosts == ("node3",)


def test_of_two_ends_that_lost_most_the_one_that_lost_with_every_peer_is_named() -> None:
    # At 25% loss on node3's incoming segments, most retransmissions were on node3's connection
    # with node1 (paired with it when the phase timed out), so node1 holds over 80% of them too;
    # node3 also lost traffic with node2, and node1 with nobody else: node3 is named.
    before = {"10.0.0.1": {"10.0.0.2": 0, "10.0.0.3": 0}, "10.0.0.2": {"10.0.0.1": 0, "10.0.0.3": 0}}
    after = {"10.0.0.1": {"10.0.0.2": 0, "10.0.0.3": 120}, "10.0.0.2": {"10.0.0.1": 0, "10.0.0.3": 12}}
    before["10.0.0.3"] = {"10.0.0.1": 0, "10.0.0.2": 0}
    after["10.0.0.3"] = {"10.0.0.1": 30, "10.0.0.2": 3}
    progress = {
        f"node{i}": read_progress(_stderr([_net(100.0, a, before[a]), _net(110.0, a, after[a])]))
        for i, a in enumerate(sorted(before), start=1)
    }
    job = _with_progress(load_job("three_nodes"), progress)
    stalled = stalled_node(job, "allreduce")
    assert stalled is not None and (stalled.host, stalled.by) == ("node3", "retransmits")
    # Only the one connection lost traffic: either end may be at fault, and neither is named by it.
    after = {"10.0.0.1": {"10.0.0.2": 0, "10.0.0.3": 120}, "10.0.0.2": {"10.0.0.1": 0, "10.0.0.3": 0}}
    after["10.0.0.3"] = {"10.0.0.1": 30, "10.0.0.2": 0}
    progress = {
        f"node{i}": read_progress(_stderr([_net(100.0, a, before[a]), _net(110.0, a, after[a])]))
        for i, a in enumerate(sorted(before), start=1)
    }
    job = _with_progress(load_job("three_nodes"), progress)
    assert _by_retransmits(job, "allreduce", None) is None


Counts = dict[str, dict[str, tuple[int, int]]]  # node -> peer -> (segments retransmitted, bytes sent)


def _attributed(before: Counts, after: Counts) -> Any:
    """The node stalled_node names from each node's counters at the phase's start and at its end,
    on the three-node job's outcome (the addresses' nodes: node1, node2, node3 in order)."""
    beats = {a: [_sent_net(100.0, a, before[a]), _sent_net(110.0, a, after[a])] for a in before}
    progress = {f"node{i}": read_progress(_stderr(beats[a])) for i, a in enumerate(sorted(beats), 1)}
    return stalled_node(_with_progress(load_job("three_nodes"), progress), "allreduce")


def test_of_two_ends_the_one_that_also_lost_what_little_a_waiting_peer_sent_it_is_named() -> None:
    # A real lab run at 25% loss on 10.199.1.13's incoming segments, the counters of its three
    # nodes from the phase's start to the first timeout: 10.199.1.12 and 10.199.1.13 stalled in
    # their pair test, 8,891 retransmissions on their 84 MiB, so both ends held over 99% of the
    # phase's; rank 0's node waited on them and sent 10.199.1.13 only 533 bytes, 5 of its segments
    # retransmitted, and nothing to 10.199.1.12 (18,884 bytes sent, none retransmitted).
    before: Counts = {
        "10.199.1.11": {"10.199.1.12": (0, 2164), "10.199.1.13": (10, 2123)},
        "10.199.1.12": {"10.199.1.11": (0, 0), "10.199.1.13": (3, 1058)},
        "10.199.1.13": {"10.199.1.11": (0, 0), "10.199.1.12": (1, 704)},
    }
    after = {
        "10.199.1.11": {"10.199.1.12": (0, 1890), "10.199.1.13": (15, 2656)},
        "10.199.1.12": {"10.199.1.11": (0, 18884), "10.199.1.13": (8747, 50254134)},
        "10.199.1.13": {"10.199.1.11": (1, 4428), "10.199.1.12": (148, 38107640)},
    }

    stalled = _attributed(before, after)
    assert stalled is not None and (stalled.host, stalled.by) == ("node3", "retransmits")
    assert stalled.evidence.startswith("retransmits: 8897 of the phase's 8897 TCP retransmissions")
    # One or two stray retransmissions on the waiting peer's connection do not single out either end.
    after["10.199.1.11"]["10.199.1.13"] = (11, 2656)
    assert _attributed(before, after) is None
    # Nor does a waiting peer's loss with both ends.
    after["10.199.1.11"]["10.199.1.13"] = (15, 2656)
    after["10.199.1.11"]["10.199.1.12"] = (4, 1890)
    assert _attributed(before, after) is None


def test_a_timeout_that_no_evidence_pins_names_no_node_not_the_rank_that_waited() -> None:
    # The same real stall with the heartbeats taken away: rank 0's node only waited, and naming it
    # would drain a healthy node; the finding fails the run and names nobody.
    job = _with_progress(load_job("stalled_mid_job"), {})
    (finding,) = read_phase("allreduce", job).findings
    assert (finding.status, finding.hosts) == ("fail", ())
    assert finding.summary.startswith("the allreduce phase stalled and no node's heartbeats or counters")
    assert "timed out waiting: " in finding.summary
    assert finding.details["unattributed"] is True
    assert finding.details["item"] == "stall_unattributed"


def test_a_lossy_node_whose_stalled_pairs_sent_little_is_named_by_its_loss_rate() -> None:
    # A real lab run at 25% loss on 10.199.1.13's incoming segments: the healthy pair, busy with
    # 16 MiB, retransmitted more segments than one of the lossy node's pairs, so no node held most
    # of the count; per MiB sent, every connection of the lossy node lost far more.
    job = load_job("lab_loss_25_busy_pair")
    stalled = stalled_node(job, "allreduce")
    assert stalled is not None and (stalled.host, stalled.by) == ("10.199.1.13", "retransmits")
    assert stalled.evidence.startswith(
        "retransmits: every connection of 10.199.1.13 (with 10.199.1.11, 10.199.1.12)"
    )
    assert "segments per MiB sent, the others at most" in stalled.evidence
    (finding,) = read_phase("allreduce", job).findings
    assert finding.hosts == ("10.199.1.13",)
    # The other real run at 25%: the count alone names it.
    counted = stalled_node(load_job("lab_loss_25"), "allreduce")
    assert counted is not None and counted.host == "10.199.1.13"
    assert counted.evidence.startswith("retransmits: 6632 of the phase's 6632 TCP retransmissions")


def _sent_net(t: float, local: str, peers: dict[str, tuple[int, int]]) -> dict[str, Any]:
    beat = _net(t, local, {a: n for a, (n, _) in peers.items()})
    for address, (_, sent) in peers.items():
        beat["net"]["peers"][address]["bytes_sent"] = sent
    return beat


def test_the_busiest_healthy_node_is_not_named_for_holding_most_of_the_count() -> None:
    # A real lab run of the suite at 25% loss on 10.199.1.13's incoming segments, its report's
    # attribution details: the two healthy nodes moved 170 MiB between them and retransmitted 1,239
    # segments doing so (7.3 a MiB), so 10.199.1.11 held 93% of the phase's 3,551 and the count
    # named it; per MiB sent, 10.199.1.13's connections lost 105 and 250 segments.
    mib = 1 << 20
    before: Counts = {
        "10.199.1.11": {"10.199.1.12": (0, 0), "10.199.1.13": (0, 0)},
        "10.199.1.12": {"10.199.1.11": (0, 0), "10.199.1.13": (0, 0)},
        "10.199.1.13": {"10.199.1.11": (0, 0), "10.199.1.12": (0, 0)},
    }
    after = {
        "10.199.1.11": {"10.199.1.12": (1239, int(170.04 * mib)), "10.199.1.13": (2065, int(19.58 * mib))},
        "10.199.1.12": {"10.199.1.11": (0, 0), "10.199.1.13": (247, int(0.987 * mib))},
        "10.199.1.13": {"10.199.1.11": (0, 0), "10.199.1.12": (0, 0)},
    }

    stalled = _attributed(before, after)
    assert stalled is not None and (stalled.host, stalled.by) == ("node3", "retransmits")
    assert stalled.evidence.startswith("retransmits: every connection of node3 (with node1, node2)")
    # Had the healthy pair lost 30 a MiB, the rates would not single out node3 (3.5x, not 5x); the
    # pair without node1 still lost more per MiB than both of node1's: the count names nobody.
    after["10.199.1.11"]["10.199.1.12"] = (int(30 * 170.04), int(170.04 * mib))
    assert _attributed(before, after) is None


def test_a_real_stall_whose_waiting_peer_lost_a_few_segments_to_the_lossy_node_names_it() -> None:
    # A real lab run at 25% loss on 10.199.1.13's incoming segments: 444 of the phase's 447
    # retransmissions were on the stalled pair 10.199.1.12 - 10.199.1.13 (2.8 MiB), so both its ends
    # held over 99%; the waiting rank 0's node lost 3 segments of the 4.7 KB it exchanged with
    # 10.199.1.13 and none with 10.199.1.12. Under the 5% share alone this run named nobody.
    job = load_job("lab_loss_25_quiet_waiter")
    stalled = stalled_node(job, "allreduce")
    assert stalled is not None and (stalled.host, stalled.by) == ("10.199.1.13", "retransmits")
    assert stalled.evidence.startswith("retransmits: 447 of the phase's 447 TCP retransmissions")
    (finding,) = read_phase("allreduce", job).findings
    assert finding.hosts == ("10.199.1.13",)


def test_the_node_whose_rank_timed_out_first_is_not_named_for_being_behind_in_its_count() -> None:
    # A real lab run at 25% loss on 10.199.1.13: rank 0 on 10.199.1.11 waited on its stalled
    # connection with the lossy node and timed out first, behind in its count (17 against 41);
    # the retransmissions were on one connection only, which does not tell its ends apart.
    job = load_job("lab_loss_25_waiter_behind")
    assert stalled_node(job, "allreduce") is None
    (finding,) = read_phase("allreduce", job).findings
    assert (finding.status, finding.hosts) == ("fail", ())


def test_a_node_whose_inside_path_stalled_is_named_though_its_own_rank_timed_out_first() -> None:
    # A real lab run: 10.199.1.12's loopback throttled; its ranks, behind at 1 collective against
    # 14, wait only on each other, and its own rank timed out first.
    job = load_job("lab_inside_path_throttled")
    stalled = stalled_node(job, "intranode")
    assert stalled is not None and (stalled.host, stalled.by) == ("10.199.1.12", "progress")
    assert stalled.evidence.startswith("progress: ranks 2, 3 on 10.199.1.12 had completed 1 collective")


def _counters_beat(t: float, local: str, counters: dict[str, int]) -> dict[str, Any]:
    sample = {"counters": counters, "local": [local], "peers": {}}
    return {"rank": 0, "phase": "allreduce", "t": t, "ops": 3, "done": False, "failed": False, "net": sample}


def test_a_node_whose_own_link_errors_grew_is_named_where_no_tcp_segment_moved() -> None:
    # NCCL over InfiniBand verbs: no TCP retransmission anywhere. node3's port counted symbol and
    # receive errors during the phase; every node's port_xmit_wait grew (congestion, any fabric)
    # and node1's remote physical errors (corrupted upstream, not on its own link).
    healthy = {"ib.port_xmit_wait": 1000, "ib.symbol_error": 2, "ib.port_rcv_remote_physical_errors": 0}
    before = {a: dict(healthy) for a in ("10.0.0.1", "10.0.0.2", "10.0.0.3")}
    after = {a: {**healthy, "ib.port_xmit_wait": 90_000} for a in before}
    after["10.0.0.1"]["ib.port_rcv_remote_physical_errors"] = 4
    after["10.0.0.3"].update({"ib.symbol_error": 122, "ib.port_rcv_errors": 35})
    before["10.0.0.3"]["ib.port_rcv_errors"] = 0

    def job_of(ends: dict[str, dict[str, int]]) -> JobOutcome:
        progress = {
            f"node{i}": read_progress(
                _stderr([_counters_beat(100.0, a, before[a]), _counters_beat(110.0, a, ends[a])])
            )
            for i, a in enumerate(sorted(before), start=1)
        }
        return _with_progress(load_job("three_nodes"), progress)

    stalled = stalled_node(job_of(after), "allreduce")
    assert stalled is not None and (stalled.host, stalled.by) == ("node3", "link_errors")
    assert stalled.evidence == (
        "link errors: ib.port_rcv_errors +35, ib.symbol_error +120 on node3 during the phase, "
        "on no other node: its link lost traffic"
    )
    # The healthy look-alike: congestion and upstream corruption only: nobody is named by them.
    after["10.0.0.3"].update({"ib.symbol_error": 2, "ib.port_rcv_errors": 0})
    assert stalled_node(job_of(after), "allreduce") is None


def test_the_heartbeat_sums_each_infiniband_port_counter_over_the_node_s_ports() -> None:
    # A real H100 node's /sys/class/infiniband (tests/data/hardware/ib/SOURCES.md): nine ports,
    # each with 14 receive errors, one with a saturated link_downed of 255 (benign at rest: only
    # growth during a phase is evidence).
    from checks.job.node.netstat import infiniband_counters

    tree = Path(__file__).parent / "data" / "hardware" / "ib" / "sys-class-infiniband-h100"
    found = infiniband_counters(str(tree))
    assert found["ib.port_rcv_errors"] == 9 * 14
    assert found["ib.symbol_error"] == 0 and found["ib.link_downed"] == 255
    assert infiniband_counters("/nonexistent") == {}
