"""Reading the TOML config file: ``[run]``, ``[expect]``, ``[job_env]``, ``[history]``, and each
check's table.

A check's table is named after the check and holds its section (:class:`preflight.settings.Settings`),
found through the registry. Unknown tables and keys are errors that name the file, the line and
the key, so a typo never silently disables a check.
"""

from __future__ import annotations

import dataclasses
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, get_type_hints

from preflight.config import ENV_NAME_RE, Config, RunSection, coerce
from preflight.errors import ConfigError
from preflight.history.settings import TABLE as HISTORY_TABLE
from preflight.history.settings import HistorySection
from preflight.registry import setting_tables

# The tables of the run itself; every other table is a check's.
RUN_TABLE = "run"
EXPECT_TABLE = "expect"
JOB_ENV_TABLE = "job_env"
_TOML_LINE_RE = re.compile(r"\(at line (\d+), column \d+\)")


def _section(cls: type[Any], data: Any, where: str) -> Any:
    if not isinstance(data, dict):
        raise ConfigError(f"{where} must be a table", key=where)
    hints = get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    values = {}
    for key, value in data.items():
        if key not in names:
            raise ConfigError(
                f"unknown key {where}.{key} (known: {', '.join(sorted(names))})", key=f"{where}.{key}"
            )
        try:
            values[key] = coerce(value, hints[key], f"{where}.{key}")
        except ConfigError as exc:
            raise ConfigError(str(exc), key=f"{where}.{key}") from None
    return cls(**values)


def _versions(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError('[expect] must be a table of name = "version"')
    expect: dict[str, str] = {}
    for name, wanted in value.items():
        if not isinstance(wanted, str | int | float) or isinstance(wanted, bool):
            raise ConfigError(f"expect.{name} must be a version string", key=f"expect.{name}")
        expect[name] = str(wanted)
    return expect


def _job_env(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ConfigError('[job_env] must be a table of NAME = "value"')
    job_env: dict[str, str] = {}
    for name, given in value.items():
        if not ENV_NAME_RE.fullmatch(name):
            raise ConfigError(f"job_env.{name}: not an environment variable name", key=f"job_env.{name}")
        if not isinstance(given, str | int | float) or isinstance(given, bool):
            raise ConfigError(f"job_env.{name} must be a string", key=f"job_env.{name}")
        job_env[name] = str(given)
    return job_env


def parse_config(
    data: Mapping[str, Any], *, source: str | None = None, tables: Mapping[str, type[Any]] | None = None
) -> Config:
    """The config a TOML document says; ``tables``: each check's table and its section (by
    default, those of the registry's checks)."""
    tables = setting_tables() if tables is None else tables
    run = RunSection()
    sections: list[Any] = []
    expect: dict[str, str] = {}
    job_env: dict[str, str] = {}
    for key, value in data.items():
        if key == RUN_TABLE:
            run = _section(RunSection, value, key)
        elif key == HISTORY_TABLE:
            sections.append(_section(HistorySection, value, key))
        elif key in tables:
            sections.append(_section(tables[key], value, key))
        elif key == EXPECT_TABLE:
            expect = _versions(value)
        elif key == JOB_ENV_TABLE:
            job_env = _job_env(value)
        else:
            known = ", ".join(sorted([RUN_TABLE, *tables, EXPECT_TABLE, JOB_ENV_TABLE, HISTORY_TABLE]))
            raise ConfigError(f"unknown section [{key}] (known: {known})", key=key)
    config = Config(run=run, expect=expect, job_env=job_env, source=source)
    return config.with_sections(*sections)


def load_config(path: Path | None) -> Config:
    """Read a TOML config; errors start with ``path:`` (and the line, where TOML gives one)."""
    if path is None:
        return Config()
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ConfigError("no such config file", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read config: {exc}", path=str(path)) from None
    except tomllib.TOMLDecodeError as exc:
        message = str(exc)
        found = _TOML_LINE_RE.search(message)
        line = int(found.group(1)) if found else None
        message = _TOML_LINE_RE.sub("", message).strip()
        raise ConfigError(f"not valid TOML: {message}", path=str(path), line=line) from None
    try:
        return parse_config(data, source=str(path))
    except ConfigError as exc:
        line = _line_of(path.read_text(encoding="utf-8-sig"), exc.key) if exc.key else None
        raise ConfigError(str(exc), path=str(path), line=line) from None


def _line_of(text: str, dotted: str) -> int | None:
    """The line that sets ``section.key`` (or opens ``[section]``), for the error message."""
    section, _, key = dotted.partition(".")
    in_section = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            in_section = stripped.strip("[] ") == section
            if in_section and not key:
                return number
        elif re.match(rf"{re.escape(key or section)}\s*=", stripped) and (in_section or not key):
            return number
    return None
