"""What a check declares besides how it runs: its settings, its command-line options, what a
profile changes in them, and what it adds to a run's expected duration.

A check's settings are a frozen dataclass (a *section*) with a default for every field and its
own validation; it is read from the check's TOML table (``[allreduce]``), and a check reads it
back with full types (``config.section(AllreduceSection)``). The core reads every declaration
through the registry: config loading (:mod:`preflight.config_file`), the command line, the
profiles and the expected duration (:mod:`preflight.profiles`) name no check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Literal, TypeVar, get_args

from preflight.config import Config

# A run profile: ``--quick``, the default, ``--deep``.
Profile = Literal["quick", "standard", "deep"]
PROFILES: frozenset[Profile] = frozenset(get_args(Profile))
# The profiles a check runs in unless it says otherwise: --quick runs only the checks that say so.
NOT_QUICK: frozenset[Profile] = frozenset({"standard", "deep"})

S = TypeVar("S")
V = TypeVar("V")


@dataclass(frozen=True)
class Option(Generic[S, V]):
    """A command-line option of ``preflight check`` that sets a check's settings.

    ``flag``, ``metavar`` and ``help`` are what ``--help`` shows. ``apply`` returns the settings
    with the option's value in them (the option's value, a string; with ``repeat``, the option may
    be given several times and ``apply`` gets every value, in order, as a tuple); a ``ValueError``
    it raises is a one-line usage error, ``--flag: message``. ``surroundings``: listed in
    ``--help`` with the job's surroundings (paths on the nodes, the job's environment) rather than
    with the other options.
    """

    flag: str
    metavar: str
    help: str
    apply: Callable[[S, V], S]
    repeat: bool = False
    surroundings: bool = False

    @property
    def dest(self) -> str:
        """The attribute argparse keeps the option's value under."""
        return "option_" + self.flag.lstrip("-").replace("-", "_")


@dataclass(frozen=True)
class Settings(Generic[S]):
    """A check's settings: the ``section`` dataclass read from the check's TOML table, the
    ``options`` that set it from the command line (applied over the file, in order), and
    ``profile``, which returns the section as a profile changes it (the same section where the
    profile changes nothing)."""

    section: type[S]
    options: tuple[Option[S, Any], ...] = ()
    profile: Callable[[S, Profile], S] | None = None

    def profiled(self, config: Config, profile: Profile) -> Config:
        """``config`` with this section as ``profile`` changes it."""
        if self.profile is None:
            return config
        current = config.section(self.section)
        changed = self.profile(current, profile)
        return config if changed == current else config.with_sections(changed)


@dataclass(frozen=True)
class Cost:
    """Seconds a check adds to a run's expected duration, from the run's config and its number
    of hosts. A cost several checks list (the job's start, for every check judged in the job) is
    counted once however many of them run; ``what`` says what it is."""

    what: str
    seconds: Callable[[Config, int], float]

    @classmethod
    def fixed(cls, what: str, seconds: float) -> Cost:
        return cls(what, lambda config, n_hosts: seconds)
