"""Matching a node's version against an ``[expect]`` entry of the config.

A plain version means "equal, or a prefix by whole components" (``3.11`` matches ``3.11.7``);
a string starting with an operator is a PEP 440 specifier set (``>=535``, ``>=2.4,<2.6``).
"""

from __future__ import annotations

from dataclasses import dataclass

from packaging.specifiers import InvalidSpecifier, SpecifierSet
from packaging.version import InvalidVersion, Version

_OPERATOR_START = ("<", ">", "=", "!", "~")


@dataclass(frozen=True)
class Match:
    """Whether a value meets an expectation; ``note`` says why not, where that is not obvious."""

    ok: bool
    note: str | None = None


def is_specifier(wanted: str) -> bool:
    return wanted.strip().startswith(_OPERATOR_START)


def specifier_error(wanted: str) -> str | None:
    """Why ``wanted`` cannot be used as an expectation, or None when it can."""
    text = wanted.strip()
    if not text:
        return "is empty"
    if is_specifier(text):
        try:
            SpecifierSet(text)
        except InvalidSpecifier:
            return "is not a valid version specifier (PEP 440, e.g. '>=2.4,<2.6')"
    return None


def _same_component(wanted: str, actual: str) -> bool:
    # Driver versions are written with leading zeros ("535.104.05"); "05" and "5" are the same.
    if wanted.isdigit() and actual.isdigit():
        return int(wanted) == int(actual)
    return wanted.lower() == actual.lower()


def _prefix_match(wanted: str, actual: str) -> bool:
    wanted_parts = wanted.split(".")
    actual_parts = actual.split(".")
    if len(wanted_parts) > len(actual_parts):
        return False
    return all(_same_component(w, a) for w, a in zip(wanted_parts, actual_parts, strict=False))


def _pep440_equal(wanted: str, actual: str) -> bool:
    # "2.4.0" is "2.4" by PEP 440, which a component prefix alone would miss.
    try:
        return Version(wanted) == Version(actual)
    except InvalidVersion:
        return False


def matches(wanted: str, actual: str) -> Match:
    """Does ``actual`` (as a node reports it) meet ``wanted`` (as written in ``[expect]``)?"""
    wanted = wanted.strip()
    actual = actual.strip()
    if is_specifier(wanted):
        try:
            specifiers = SpecifierSet(wanted)
        except InvalidSpecifier:
            return Match(False, f"{wanted!r} is not a valid version specifier")
        try:
            version = Version(actual)
        except InvalidVersion:
            return Match(False, f"{actual!r} is not a version")
        # A nightly or release candidate is still the version it says; do not hide it from ">=".
        return Match(specifiers.contains(version, prereleases=True))
    wanted_public, _, wanted_local = wanted.partition("+")
    actual_public, _, actual_local = actual.partition("+")
    # Local labels ("+cu121") count only when the expectation names one.
    if wanted_local and wanted_local.lower() != actual_local.lower():
        return Match(False)
    return Match(_prefix_match(wanted_public, actual_public) or _pep440_equal(wanted_public, actual_public))
