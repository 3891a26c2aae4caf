"""What a check declares about its settings reaches the core through the registry: its config
table, its command-line options, what each profile changes and runs, and what it adds to the
expected duration. A made-up check registered for the test shows it for any check; the real
ones keep today's tables, options, --quick checks and figures."""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import pytest

import checks
from checks.storage.settings import StorageSection
from preflight import cli
from preflight.check import Check
from preflight.config import Config
from preflight.config_file import parse_config
from preflight.errors import ConfigError, UsageError
from preflight.model import CheckResult
from preflight.profiles import FACTS_PER_DOUBLING_S, FACTS_S, apply_profile, checks_of, expected_duration_s
from preflight.registry import all_checks, setting_tables, unreached_check
from preflight.settings import PROFILES, Cost, Option, Profile, Settings
from preflight.view import Presentation


@dataclass(frozen=True)
class ProbeSection:
    """A made-up check's settings."""

    level: int = 1
    label: str = ""


def _with_level(section: ProbeSection, text: str) -> ProbeSection:
    if not text.isdigit():
        raise ValueError(f"{text!r} is not a level")
    return dataclasses.replace(section, level=int(text))


def _profiled(section: ProbeSection, profile: Profile) -> ProbeSection:
    return dataclasses.replace(section, level=section.level * 10) if profile == "deep" else section


SHARED = Cost.fixed("a start the made-up checks share", 7.0)
MADE_UP = Check(
    name="made_up",
    title="a check made up for the test",
    run=lambda ctx: [CheckResult("made_up", "pass", f"level {ctx.config.section(ProbeSection).level}")],
    presentation=Presentation(heading="Made up", about="a check made up for the test"),
    settings=Settings(
        ProbeSection, options=(Option("--made-up-level", "N", "the level", _with_level),), profile=_profiled
    ),
    profiles=PROFILES,
    duration=(SHARED, Cost("its own part", lambda config, n_hosts: config.section(ProbeSection).level * 0.5)),
)
SHARING = Check(
    name="sharing",
    title="another made-up check, sharing a cost with the first",
    run=lambda ctx: [],
    presentation=Presentation(heading="Sharing", about="another made-up check"),
    duration=(SHARED,),
)


@pytest.fixture
def made_up(monkeypatch: pytest.MonkeyPatch) -> None:
    """The registry with the two made-up checks after the real ones."""
    registered = checks.registry()
    monkeypatch.setattr(checks, "registry", lambda: (*registered, MADE_UP, SHARING))


@pytest.mark.usefixtures("made_up")
def test_a_checks_table_is_read_into_its_section() -> None:
    assert setting_tables()["made_up"] is ProbeSection
    config = parse_config({"made_up": {"level": 3, "label": "x"}})
    assert config.section(ProbeSection) == ProbeSection(level=3, label="x")
    with pytest.raises(ConfigError, match=r"unknown key made_up\.levle \(known: label, level\)"):
        parse_config({"made_up": {"levle": 3}})
    with pytest.raises(ConfigError, match=r"made_up\.level must be a whole number"):
        parse_config({"made_up": {"level": "high"}})
    with pytest.raises(ConfigError, match=r"unknown section \[made_uq\] \(known: .*made_up"):
        parse_config({"made_uq": {}})


@pytest.mark.usefixtures("made_up")
def test_a_checks_option_lands_in_its_section_over_the_file() -> None:
    config = parse_config({"made_up": {"level": 3, "label": "x"}})
    args = cli._parser().parse_args(["check", "--made-up-level", "5"])
    assert cli._with_options(config, args).section(ProbeSection) == ProbeSection(level=5, label="x")
    unchanged = cli._with_options(config, cli._parser().parse_args(["check"]))
    assert unchanged.section(ProbeSection) == ProbeSection(level=3, label="x")
    with pytest.raises(UsageError, match=r"^--made-up-level: 'high' is not a level$"):
        cli._with_options(config, cli._parser().parse_args(["check", "--made-up-level", "high"]))


@pytest.mark.usefixtures("made_up")
def test_a_checks_profile_changes_and_membership_come_from_it() -> None:
    assert apply_profile(Config(), "deep").section(ProbeSection).level == 10
    assert apply_profile(Config(), "quick").section(ProbeSection).level == 1
    assert "made_up" in checks_of("quick") and "sharing" not in checks_of("quick")
    assert {"made_up", "sharing"} <= set(checks_of("standard"))


@pytest.mark.usefixtures("made_up")
def test_a_checks_expected_duration_counts_a_shared_cost_once() -> None:
    config = Config().with_sections(ProbeSection(level=4))
    alone = expected_duration_s(config, 3, ["connect"])
    assert expected_duration_s(config, 3, ["connect", "made_up"]) == pytest.approx(alone + 7.0 + 2.0)
    assert expected_duration_s(config, 3, ["connect", "sharing"]) == pytest.approx(alone + 7.0)
    both = expected_duration_s(config, 3, ["connect", "made_up", "sharing"])
    assert both == pytest.approx(alone + 7.0 + 2.0)


def test_every_table_is_named_after_its_check_and_every_section_has_defaults() -> None:
    tables = setting_tables()
    assert set(tables) & {"run", "expect", "job_env"} == set()
    assert len(set(tables.values())) == len(tables)  # one check per section
    for name, section in tables.items():
        assert dataclasses.is_dataclass(section), name
        assert parse_config({name: {}}).section(section) == section()


def test_the_checks_keep_their_tables_options_and_quick_profile() -> None:
    assert set(setting_tables()) == {
        "versions", "gpu_memory", "ports", "allreduce", "ddp", "baseline", "storage",
        "environment", "limits", "names", "clocks", "compute", "hardware", "intranode", "rails",
    }  # fmt: skip
    quick = ["connect", "versions", "ports", "gpu_memory", "environment", "limits", "allreduce"]
    assert checks_of("quick") == quick
    assert checks_of("standard") == checks_of("deep") == [c.name for c in all_checks()]
    args = cli._parser().parse_args(
        ["check", "--data", "/a", "--data", "/b", "--checkpoint-dir", "/ckpt", "--checkpoint-size", "1T"]
    )
    storage = cli._with_options(Config(), args).section(StorageSection)
    assert (storage.data, storage.checkpoint_dir) == (("/a", "/b"), "/ckpt")
    assert storage.checkpoint_bytes == 1 << 40
    assert unreached_check() == "connect"
    assert [c.name for c in all_checks() if c.names_unreached] == ["connect"]


def test_the_expected_duration_keeps_its_figures() -> None:
    every = [c.name for c in all_checks()]
    facts = FACTS_S + FACTS_PER_DOUBLING_S * math.log2(3)
    # Ports 0.4, names and clocks 0.2 each, storage nothing without paths, the job's start 0.4,
    # the burn 1 s, the sweep 1.8 s, three pair rounds at a quarter of 2 s, the ring's three rounds
    # of rail tests at a quarter of 2 s (a GPU node's rails at once), DDP 0.4 + 0.1 + 30 steps.
    standard = facts + 0.4 + 0.2 + 0.2 + 0.4 + 1.0 + 1.8 + 3 * 0.5 + 3 * 0.5 + 0.4 + 0.1 + 30 * 0.005
    assert expected_duration_s(Config(), 3, every) == pytest.approx(standard)
    with_data = Config().with_sections(StorageSection(data=("/data",)))
    assert expected_duration_s(with_data, 3, every) == pytest.approx(standard + 0.4)
    # Deep: the burn 10 s, the sweep at a factor of 2 and 50 iterations within 20 s, pair rounds
    # at a quarter of 4 s, 200 DDP steps.
    deep = (
        facts + 0.4 + 0.2 + 0.2 + 0.4 + 10.0 + 1.8 * 2 * 50 / 20 + 3 * 1.0 + 3 * 0.5 + 0.4 + 0.1 + 200 * 0.005
    )
    assert expected_duration_s(apply_profile(Config(), "deep"), 3, every) == pytest.approx(deep)
    quick = facts + 0.4 + 0.4 + 1.8 * 5 / 20  # ports, the job's start, the sweep at 5 iterations; no pairs
    quick_config = apply_profile(Config(), "quick")
    assert expected_duration_s(quick_config, 3, checks_of("quick")) == pytest.approx(quick)


def test_the_rail_tests_expected_and_budgeted_count_the_rounds_the_ring_takes() -> None:
    # Two nodes are one pair: one round of rail tests, not two; an even ring takes two rounds, an
    # odd one three.
    from checks.rails.phase import PHASE

    for n_nodes, rounds in ((2, 1), (3, 3), (4, 2), (5, 3), (8, 2), (9, 3)):
        assert PHASE.expected_s(Config(), n_nodes) == pytest.approx(rounds * 2.0 / 4), n_nodes
        # The budget: the bandwidth and the latency passes, each re-tested at most once.
        sent = PHASE.sent(Config(), [f"node{i}" for i in range(n_nodes)], True)
        assert PHASE.budget_s(sent) == pytest.approx(5.0 + 2 * 2 * rounds * (2.0 + 1)), n_nodes
