"""The job's own environment as the user gives it (``--env NAME=VALUE``, ``--env-file FILE``,
``[job_env]``): the variables its launcher sets on every node, over the nodes' own.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from preflight.config import ENV_NAME_RE
from preflight.errors import InputError, UsageError


def parse_assignment(text: str, *, where: str) -> tuple[str, str]:
    """``NAME=VALUE`` -> (NAME, VALUE); the value may be empty, the name may not."""
    name, sep, value = text.partition("=")
    if not sep:
        raise UsageError(f"{where}: {text!r} is not NAME=VALUE")
    if not ENV_NAME_RE.fullmatch(name):
        raise UsageError(f"{where}: {name!r} is not an environment variable name")
    return name, value


def _unquote(value: str) -> str:
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def read_env_file(path: Path) -> dict[str, str]:
    """``NAME=VALUE`` lines, as a shell would source them for simple values: ``#`` comments and
    blank lines skipped, an ``export`` prefix and a pair of quotes around the value dropped."""
    try:
        text = path.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise InputError("no such environment file", path=str(path)) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read the environment file: {exc}", path=str(path)) from None
    found: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("export "):
            line = line[len("export ") :].lstrip()
        name, sep, value = line.partition("=")
        if not sep or not ENV_NAME_RE.fullmatch(name):
            raise InputError(f"not NAME=VALUE: {raw.strip()!r}", path=str(path), line=number)
        found[name] = _unquote(value)
    return found


def job_environment(
    configured: Mapping[str, str], files: Iterable[Path], assignments: Iterable[str]
) -> dict[str, str]:
    """The config's ``[job_env]``, then each file in order, then each ``--env``: later wins."""
    merged = dict(configured)
    for path in files:
        merged.update(read_env_file(path))
    for text in assignments:
        name, value = parse_assignment(text, where="--env")
        merged[name] = value
    return merged
