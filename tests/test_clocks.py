"""The clocks judge: offsets by the midpoint method with their uncertainty, nodes judged against
each other (three or more) or the controller (fewer), and what the kernel says of time services."""

from __future__ import annotations

from checks.clocks import ClockSample, ClocksObservation, best_sample, judge_clocks
from checks.clocks.settings import ClocksSection
from preflight.facts import TimeFacts

SYNCED = TimeFacts(synchronised=True, state="ok", services=("chronyd",))


def sample(offset_s: float, round_trip_s: float = 0.002, at: float = 1_800_000_000.0) -> ClockSample:
    return ClockSample(at, at + round_trip_s, at + round_trip_s / 2 + offset_s)


def observe(offsets: dict[str, float], **kwargs: object) -> ClocksObservation:
    samples = {h: sample(o) for h, o in offsets.items()}
    return ClocksObservation(samples=samples, time=dict.fromkeys(offsets, SYNCED), **kwargs)  # type: ignore[arg-type]


def test_the_midpoint_gives_the_offset_and_half_the_round_trip_its_uncertainty() -> None:
    found = ClockSample(sent_s=100.0, received_s=100.4, node_s=110.2)
    assert round(found.offset_s, 6) == 10.0
    assert round(found.uncertainty_s, 6) == 0.2
    assert best_sample([found, sample(3.0, 0.01), sample(5.0, 0.9)]).offset_s == sample(3.0, 0.01).offset_s


def test_clocks_in_step_pass() -> None:
    (result,) = judge_clocks(observe({"node1": 0.001, "node2": -0.002, "node3": 0.0}), ClocksSection())
    assert result.status == "pass"
    assert result.summary.startswith("3 clocks within 3 ms of each other")
    assert "kernel clock synchronised on node[1-3]" in result.summary


def test_one_skewed_node_is_named_against_the_others_not_the_controller() -> None:
    # The controller itself is 40 s behind every node: that moves them all alike.
    offsets = {"node1": 40.0, "node2": 40.01, "node3": 160.0, "node4": 39.99}
    (result,) = judge_clocks(observe(offsets), ClocksSection())
    assert (result.status, result.hosts) == ("warn", ("node3",))
    assert result.summary.startswith("node3: its clock is +120 s (\u00b11.0 ms) from the other nodes' median")
    assert result.details["nodes"]["node3"]["offset_s"] == 160.0


def test_past_five_minutes_a_skew_fails() -> None:
    (result,) = judge_clocks(observe({"node1": 0, "node2": 0, "node3": -400.0}), ClocksSection())
    assert (result.status, result.hosts) == ("fail", ("node3",))


def test_a_skew_within_the_measurements_uncertainty_is_not_named() -> None:
    samples = {"node1": sample(0.0), "node2": sample(1.5, round_trip_s=2.0)}
    (result,) = judge_clocks(ClocksObservation(samples), ClocksSection(max_offset_s=1.0))
    assert result.status == "pass"
    samples["node2"] = sample(1.5, round_trip_s=0.2)
    (result,) = judge_clocks(ClocksObservation(samples), ClocksSection(max_offset_s=1.0))
    assert (result.status, result.hosts) == ("warn", ("node2",))
    assert "from the controller's clock" in result.summary


def test_an_unsynchronised_kernel_clock_warns_and_unknown_is_said_not_guessed() -> None:
    obs = observe({"node1": 0, "node2": 0, "node3": 0})
    time = {
        "node1": SYNCED,
        "node2": TimeFacts(synchronised=False, state="unsynchronised", services=("chronyd",)),
        "node3": None,
    }
    (result,) = judge_clocks(ClocksObservation(obs.samples, time=time), ClocksSection())
    assert (result.status, result.hosts) == ("warn", ("node2",))
    assert "node2 runs chronyd" in result.summary
    assert result.details["nodes"]["node3"]["service"] == "unknown"
    (quiet,) = judge_clocks(ClocksObservation(obs.samples, time=time), ClocksSection(unsynchronised="ignore"))
    assert quiet.status == "pass"
    assert "kernel clock unknown on node3" in quiet.summary


def test_every_node_unsynchronised_alike_is_said_unless_required() -> None:
    obs = observe({"node1": 0, "node2": 0, "node3": 0})
    loose = TimeFacts(synchronised=False, state="unsynchronised", services=())
    time = dict.fromkeys(obs.samples, loose)
    (said,) = judge_clocks(ClocksObservation(obs.samples, time=time), ClocksSection())
    assert said.status == "pass"
    assert "kernel clock unsynchronised on node[1-3]" in said.summary
    (required,) = judge_clocks(
        ClocksObservation(obs.samples, time=time), ClocksSection(require_synchronised=True)
    )
    assert (required.status, required.hosts) == ("warn", ("node1", "node2", "node3"))


def test_offsets_read_with_their_sign_and_no_negative_zero() -> None:
    from checks.clocks.judge import signed

    assert signed(120.0) == "+120 s" and signed(-2.314) == "-2.31 s" and signed(-0.0042) == "-4.2 ms"
    assert signed(-0.00001) == "0.0 ms" and signed(0.0) == "0.0 ms"
