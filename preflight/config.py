"""A run's settings: how the run behaves (``[run]``), the expectations, the job's environment,
and each check's own section, which the check declares (:class:`preflight.settings.Settings`).

Every threshold has a default that works with no config at all. Precedence: command
line > environment (``PREFLIGHT_*``) > file > defaults. The file is read by
:mod:`preflight.config_file`; the environment variables and run options are applied here.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar, get_args, get_origin, get_type_hints

from preflight.errors import ConfigError

# What a difference some checks judge does: fail the run, warn, or nothing.
DriftPolicy = Literal["fail", "warn", "ignore"]


@dataclass(frozen=True)
class RunSection:
    """How the run itself behaves."""

    python: str = "python3"
    timeout_s: float = 300.0
    connect_timeout_s: float = 10.0
    probe_timeout_s: float = 60.0
    # Seconds a host may send nothing (no output, no heartbeat) before it is named as silent.
    silence_s: float = 6.0
    fanout: int = 64
    port: int = 29500
    # A Slurm topology.conf (SwitchName=... Nodes=...): names the switch behind a cut.
    topology: str = ""


S = TypeVar("S")


@dataclass(frozen=True)
class Config:
    """A run's settings: ``[run]``, the expectations and the job's environment, and each check's
    own section (:meth:`section`), by its type. A section the config file does not set is its
    defaults."""

    run: RunSection = field(default_factory=RunSection)
    # The job's own environment, applied on every node as its launcher would (``[job_env]``,
    # ``--env-file``, ``--env``): what the environment check compares is what the job sees.
    job_env: Mapping[str, str] = field(default_factory=dict)
    # Expected versions: fact name or package name -> "2.4.0", "2.4" (prefix) or ">=2.4,<2.6".
    expect: Mapping[str, str] = field(default_factory=dict)
    source: str | None = None
    # Node name -> the leaf switch it hangs off, from a topology file (--topology, [run] topology).
    switch_of: Mapping[str, str] = field(default_factory=dict)
    # The checks' sections read from the file or changed since (by options, a profile), by type.
    sections: Mapping[type[Any], Any] = field(default_factory=dict)

    def section(self, cls: type[S]) -> S:
        """The check section ``cls``: as read or changed, else its defaults."""
        found = self.sections.get(cls)
        return found if isinstance(found, cls) else cls()

    def with_sections(self, *sections: object) -> Config:
        """This config with ``sections`` in place of the sections of their types."""
        return dataclasses.replace(self, sections={**self.sections, **{type(s): s for s in sections}})


ENV_NAME_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def coerce(value: Any, annotation: Any, where: str) -> Any:
    """``value`` as a field annotated ``annotation`` holds it; a :class:`ConfigError` naming
    ``where`` (``run.fanout``, ``PREFLIGHT_FANOUT``) when it cannot."""
    origin = get_origin(annotation)
    if origin is Literal:
        choices = get_args(annotation)
        if value not in choices:
            raise ConfigError(f"{where} must be one of {', '.join(map(str, choices))}, not {value!r}")
        return value
    if origin is tuple:
        item = get_args(annotation)[0]
        if item is int:
            if not isinstance(value, list) or not all(
                isinstance(v, int) and not isinstance(v, bool) and 0 < v < 65536 for v in value
            ):
                raise ConfigError(f"{where} must be a list of port numbers")
            return tuple(value)
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise ConfigError(f"{where} must be a list of strings")
        return tuple(value)
    if annotation is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{where} must be true or false, not {value!r}")
        return value
    if annotation is float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ConfigError(f"{where} must be a number, not {value!r}")
        if value < 0:
            raise ConfigError(f"{where} must not be negative")
        return float(value)
    if annotation is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ConfigError(f"{where} must be a whole number, not {value!r}")
        if value < 0:
            raise ConfigError(f"{where} must not be negative")
        return value
    if annotation is str:
        if not isinstance(value, str):
            raise ConfigError(f"{where} must be a string, not {value!r}")
        return value
    raise TypeError(f"unsupported config type {annotation!r}")


# Environment variables that override the file (and are overridden by the command line).
ENVIRONMENT: dict[str, str] = {
    "PREFLIGHT_PYTHON": "python",
    "PREFLIGHT_TIMEOUT": "timeout_s",
    "PREFLIGHT_CONNECT_TIMEOUT": "connect_timeout_s",
    "PREFLIGHT_FANOUT": "fanout",
    "PREFLIGHT_PORT": "port",
}


def with_overrides(
    config: Config, overrides: Mapping[str, Any], environ: Mapping[str, str] | None = None
) -> Config:
    """Apply environment then command-line values (``None`` means "not given") to ``[run]``."""
    environ = os.environ if environ is None else environ
    hints = get_type_hints(RunSection)
    values: dict[str, Any] = {}
    for variable, key in ENVIRONMENT.items():
        if variable in environ:
            raw: Any = environ[variable]
            if hints[key] is not str:
                try:
                    raw = float(raw) if hints[key] is float else int(raw)
                except ValueError:
                    raise ConfigError(f"{variable}={environ[variable]!r} is not a number") from None
            values[key] = coerce(raw, hints[key], variable)
    for key, value in overrides.items():
        if value is not None:
            values[key] = coerce(value, hints[key], f"--{key.removesuffix('_s').replace('_', '-')}")
    return dataclasses.replace(config, run=dataclasses.replace(config.run, **values))
