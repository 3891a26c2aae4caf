"""Helpers every node script uses, written once: error texts, version codes, the JSON line a
script prints, and importing the training stack out of the cyclic collector's way.

Node code (see :mod:`preflight.bundle`): standard library only, Python 3.8 or newer.
"""

from __future__ import annotations

import contextlib
import gc
import importlib
import json
import os
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Iterator

# Why a script host has no TMPDIR of its own, for the scripts it runs (set by the host).
TMPDIR_ERROR = "PREFLIGHT_TMPDIR_ERROR"


def error_text(exc: BaseException, first_line: bool = False) -> str:
    """``Type: message``; with ``first_line``, only the message's first line (torch errors often end
    in a C++ stack, and the first line is the one a person reads)."""
    if first_line:
        lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
        text = lines[0] if lines else ""
    else:
        text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def text_of(value: Any) -> str:
    """A str from what a library returns as bytes or str depending on its version (pynvml)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return str(value)


def _decode_version(code: int, wide_from: int) -> str:
    """A library's integer version -> "X.Y.Z": X*10000+Y*100+Z from ``wide_from`` on (when the
    minor number outgrew one digit), X*1000+Y*100+Z before."""
    major, rest = divmod(code, 10000 if code >= wide_from else 1000)
    minor, patch = divmod(rest, 100)
    return f"{major}.{minor}.{patch}"


def decode_nccl_version(code: int) -> str:
    """``ncclGetVersion`` code -> "X.Y.Z" (X*10000+Y*100+Z since 2.9, X*1000+Y*100+Z before)."""
    return _decode_version(code, 20900)


def format_nccl_version(value: Any) -> str | None:
    """torch.cuda.nccl.version(): a tuple (2, 21, 5) or, on older torch, an int code."""
    if value is None:
        return None
    if isinstance(value, (tuple, list)):
        return ".".join(str(part) for part in value)
    if isinstance(value, int):
        return decode_nccl_version(value)
    return str(value)


def decode_cudnn_version(code: int) -> str:
    """``cudnnGetVersion`` code -> "X.Y.Z" (X*1000+Y*100+Z up to 8.x, X*10000+Y*100+Z from 9)."""
    return _decode_version(code, 90000)


def decode_cuda_version(code: int) -> str:
    """CUDA driver version code -> "X.Y" (12040 -> "12.4")."""
    major, rest = divmod(code, 1000)
    return f"{major}.{rest // 10}"


def write_line(document: Any, fd: int = 1) -> None:
    """``document`` as one line of JSON on ``fd``, in as many writes as it takes. ASCII JSON
    (non-ASCII escaped) reads the same whatever the node's locale is."""
    pending = memoryview((json.dumps(document, default=str) + "\n").encode("ascii"))
    while pending:
        pending = pending[os.write(fd, pending) :]


class StdoutToStderr:
    """Send anything written to fd 1 (Python or C code) to stderr; keep the real stdout."""

    def __enter__(self) -> int:
        if sys.stdout is not None:
            sys.stdout.flush()
        self.saved = os.dup(1)
        os.dup2(2, 1)
        self.python_stdout = sys.stdout
        sys.stdout = sys.stderr
        return self.saved

    def __exit__(self, *exc_info: object) -> None:
        try:
            if sys.stdout is not None:
                sys.stdout.flush()
        finally:
            sys.stdout = self.python_stdout
            os.dup2(self.saved, 1)
            os.close(self.saved)


@contextlib.contextmanager
def collector_paused() -> Iterator[None]:
    """Run the block with the cyclic collector paused, then freeze what it made.

    An import as large as torch's makes objects by the hundred thousand and keeps them all; the
    collector, woken every few hundred allocations, would walk them again and again (about a
    fifth of the CPU time of importing torch and DDP's modules, torch 2.13), and every full
    collection after, here or in a child forked from here, would walk them once more. Paused
    meanwhile, then frozen: what was imported is never walked (Python's advice for a process
    that forks without exec). ``benchmarks/import_collector.py`` measures it."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if collecting:
            gc.enable()


def import_quietly(name: str) -> Any:
    """``name`` imported with what it prints sent to stderr, and out of the collector's way
    (:func:`collector_paused`)."""
    with collector_paused(), StdoutToStderr():
        return importlib.import_module(name)
