"""The facts probe that stays: the facts document, then a host for the scripts the controller sends
next (the training job forks its ranks from it), in a TMPDIR of its own.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from typing import TYPE_CHECKING, Any

from preflight.node.beat import start_beating, stop_beating
from preflight.node.collect import collect
from preflight.node.masking import scrub
from preflight.node.shared import TMPDIR_ERROR, error_text, import_quietly, write_line
from preflight.node.stack import torch_facts

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    JsonDict = dict[str, Any]

# With the option ``stay``, the probe stays after its document as a clean host for the next
# script the controller sends (the training job, which forks its ranks from here): torch is
# imported once, by this process, and what the job needs next is imported while the facts are
# finished and the controller runs its other checks. Clean means one thread whenever it forks, and
# CUDA and NVML never touched here, so that a fork of this process can use them: the gatherers that
# start threads, NVML or CUDA run in forked children (the other facts beside the import of torch,
# then torch's own facts).


def _in_child(work: Callable[[], Any]) -> tuple[int, int]:
    """Fork a child that runs ``work`` with its stdout sent to stderr and writes the JSON of its
    result to a pipe; the child's pid and the pipe's read end."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write_end)
        return pid, read_end
    try:
        os.close(read_end)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        try:
            payload = {"value": work()}
        except BaseException as exc:
            payload = {"error": error_text(exc)}
        write_line(payload, write_end)
        sys.stderr.flush()
    finally:
        os._exit(0)


def _from_child(child: tuple[int, int]) -> Any:
    """What a child of :func:`_in_child` returned; raises RuntimeError with its error."""
    pid, read_end = child
    chunks = []
    while True:
        chunk = os.read(read_end, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(read_end)
    _, status = os.waitpid(pid, 0)
    try:
        payload = json.loads(b"".join(chunks))
    except ValueError:
        raise RuntimeError(f"the probe's child ended without a result (wait status {status})") from None
    if "error" in payload:
        raise RuntimeError(payload["error"])
    return payload.get("value")


def _private_tmpdir() -> str | None:
    """A directory of this run's own for TMPDIR (torch's caches land there), announced on stderr so
    that the controller can remove it even when this process is killed; None if none can be made."""
    # Where the job's own temporary files would go (Python would fall back to another directory
    # without saying so; a training job's other tools would not).
    where = os.environ.get("TMPDIR") or "/tmp"
    try:
        path = tempfile.mkdtemp(prefix="preflight.", dir=where)
    except OSError as exc:
        # The job cannot run without one (torch writes its caches there): its host says so.
        os.environ[TMPDIR_ERROR] = f"cannot create a temporary directory in {where}: {exc.strerror}"
        return None
    os.environ["TMPDIR"] = path
    tempfile.tempdir = None  # read TMPDIR again
    sys.stderr.write(f"preflight-tmpdir={path}\n")
    sys.stderr.flush()
    return path


def _raise_exit(number: int, frame: Any) -> None:
    raise SystemExit(128 + number)


def stay(options: Mapping[str, Any]) -> int:
    """The facts document (none with the option ``serve``; a heartbeat on stderr while it is
    gathered: :mod:`preflight.node.beat`), then host the scripts the controller sends on stdin, in
    this process, in a TMPDIR of its own that is removed however it ends (TERM, HUP, the end of
    stdin)."""
    others = None if options.get("serve") else _in_child(lambda: collect(options, skip=("torch",)))
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, _raise_exit)
    tmpdir = _private_tmpdir()
    try:
        return _stay(options, others, lambda: _remove(tmpdir))
    finally:
        _remove(tmpdir)


def _remove(path: str | None) -> None:
    if path:
        shutil.rmtree(path, ignore_errors=True)


def _import_torch() -> tuple[Any, tuple[int, int] | None, str | None]:
    """torch imported here, and a child forked to read its facts: (the module, the child, None), or
    (None, None, why not)."""
    try:
        torch = import_quietly("torch")
    except ImportError as exc:
        return None, None, f"torch not importable: {exc}"
    except Exception as exc:
        return None, None, f"torch not importable: {error_text(exc)}"
    return torch, _in_child(lambda: torch_facts(torch)), None


def _document(
    others: tuple[int, int], torch_child: tuple[int, int] | None, torch_reason: str | None
) -> JsonDict:
    """The whole document: the other facts from the child ``others``, torch's own from
    ``torch_child`` (or why there are none)."""
    document: JsonDict = _from_child(others)
    facts = document["facts"]
    if torch_child is not None:
        try:
            facts["torch"] = scrub(_from_child(torch_child))
        except RuntimeError as exc:
            torch_reason = f"torch gatherer failed: {exc}"
    if torch_reason:
        facts["unavailable"]["torch"] = scrub(torch_reason)
    return document


def _stay(options: Mapping[str, Any], others: tuple[int, int] | None, cleanup: Callable[[], None]) -> int:
    if others is None:
        return serve(cleanup)  # a bare script host: no facts
    beater = start_beating()
    try:
        torch, torch_child, torch_reason = _import_torch()
        # While the children finish the document, this process imports what the job needs next
        # (DDP's modules: most of a second of CPU), so the job can start as soon as it is sent. The
        # document is written by a thread, on a copy of stdout (the imports send fd 1 to stderr);
        # the thread has ended before anything is forked from here again.
        stdout = os.dup(1)
        written: list[bool] = []
        writer = threading.Thread(
            target=lambda: written.append(_write_document(others, torch_child, torch_reason, stdout))
        )
        writer.start()
        if torch is not None:
            for name in options.get("stay", {}).get("imports", ()):
                with contextlib.suppress(Exception):
                    import_quietly(str(name))
        writer.join()
        os.close(stdout)
    finally:
        stop_beating(beater)
    return serve(cleanup) if written == [True] else 1


def _write_document(
    others: tuple[int, int], torch_child: tuple[int, int] | None, torch_reason: str | None, fd: int
) -> bool:
    """Write the facts document on ``fd`` once its children are done; False (said on stderr) when the
    facts gatherer failed."""
    try:
        write_line(_document(others, torch_child, torch_reason), fd)
    except RuntimeError as exc:
        sys.stderr.write(f"the facts gatherer failed: {exc}\n")
        return False
    return True


def once(options: Mapping[str, Any]) -> int:
    """The facts document, the other facts gathered while torch imports (a heartbeat on stderr
    meanwhile: :mod:`preflight.node.beat`); then the process ends
    without the interpreter's teardown, which with torch loaded costs about half a second of CPU
    and delays the exit status the controller waits for."""
    beater = start_beating()
    try:
        others = _in_child(lambda: collect(options, skip=("torch",)))
        written = _write_document(others, *_import_torch()[1:], 1)
    finally:
        stop_beating(beater)
    if not written:
        return 1
    sys.stderr.flush()
    os._exit(0)


def serve(cleanup: Callable[[], None] | None = None) -> int:
    """Run the scripts the controller sends, one after another, until stdin ends: each is a line of
    JSON (``length``: the script's bytes, ``name``, ``args``: its argv), then the script."""
    stdin = sys.stdin.buffer
    while True:
        header = stdin.readline()
        if not header.strip():
            return 0
        request = json.loads(header)
        source = stdin.read(int(request["length"]))
        sys.argv = [str(request.get("name", "preflight-script")), *map(str, request.get("args", ()))]
        # A script that ends this process itself calls __preflight_cleanup__ first.
        namespace = {"__name__": "__main__", "__preflight_source__": source, "__preflight_cleanup__": cleanup}
        exec(compile(source, sys.argv[0], "exec"), namespace)
