"""Running node code on a node: ``preflight.node.facts`` for the facts every check reads, and each
check's own beside it (``checks.ports.node``...).

A node script is a node module (standard library, plus torch/pynvml when the node has them, and
other node modules: :mod:`preflight.bundle`) shipped with the node modules it imports as one
bundle, sent as the stdin of ``python -`` so that nothing is written to the node's disk. It
prints one JSON document, or talks by lines (:func:`start_node_script`).

Every script the controller starts is framed: its first words on stdout are a line that carries a
nonce drawn for that command (:func:`frame_marker`), and only what follows it is the script's. What
the node's login shell prints before (a banner, an ``echo`` in ``~/.bashrc``, which bash runs even
for ``ssh host command``) or after the script is kept apart as the node's shell output.
"""

from __future__ import annotations

import contextlib
import json
import secrets
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from preflight.bundle import bundle
from preflight.model import HostError
from preflight.transport import (
    KEEP_HEAD_BYTES,
    KEEP_TAIL_BYTES,
    CommandResult,
    HostUnavailable,
    RemoteProcess,
    Transport,
)
from preflight.units import binary_size

# Exit status of a command the shell (or `timeout`) could not find or run.
_NOT_FOUND = 127
_NOT_EXECUTABLE = 126


def node_script(module: str, carried: Sequence[str] = ()) -> bytes:
    """What is shipped to a node to run the node module ``module`` (dotted) as ``__main__``: its
    bundle (:func:`preflight.bundle.bundle`), with the node modules ``carried`` that it imports by
    name; nothing is imported here."""
    return bundle(module, carried)


# The frame's line: this text, then the command's nonce. A shell cannot print it by chance.
FRAME_PREFIX = b"preflight-frame="


def frame_marker() -> bytes:
    """A fresh frame line (with its newline) for one command."""
    return FRAME_PREFIX + secrets.token_hex(12).encode("ascii") + b"\n"


def framed(source: bytes, marker: bytes) -> bytes:
    """``source`` that first writes ``marker`` on fd 1, before it imports anything, leaving no name
    behind in the script's globals."""
    return b"__import__('os').write(1, " + repr(marker).encode("ascii") + b")\n" + source


@dataclass(frozen=True)
class ScriptAnswer:
    """A script's JSON document, and what the node's login shell printed on stdout around it."""

    document: dict[str, Any]
    shell_output: bytes = b""  # kept as the transport kept it (its first and last MiB)
    shell_output_bytes: int = 0  # how many bytes it printed, the ones not kept included


def run_node_script(
    transport: Transport,
    name: str,
    *,
    python: str,
    args: tuple[str, ...] = (),
    timeout_s: float,
) -> dict[str, Any]:
    """Run a node script with the node's Python and return its JSON document.

    Raises :class:`HostUnavailable` with a cause a person can act on: python missing,
    timed out, crashed (with the end of its stderr), or printed something that is not JSON.
    """
    return run_node_script_answer(transport, name, python=python, args=args, timeout_s=timeout_s).document


def run_node_script_answer(
    transport: Transport,
    name: str,
    *,
    python: str,
    args: tuple[str, ...] = (),
    timeout_s: float,
) -> ScriptAnswer:
    """:func:`run_node_script`, with what the node's shell printed around the document."""
    marker = frame_marker()
    result = transport.run([python, "-", *args], stdin=framed(node_script(name), marker), timeout_s=timeout_s)
    return parse_script_output(result, python=python, timeout_s=timeout_s, frame=marker)


def split_frame(stdout: bytes, marker: bytes) -> tuple[bytes, bytes] | None:
    """``stdout`` split at the frame line: what came before it and what came after it; None when
    the frame is not in it."""
    before, found, after = stdout.partition(marker)
    return (before, after) if found else None


def _document_in(text: bytes) -> tuple[Any, bytes]:
    """The JSON document at the start of ``text`` and what follows it; raises ValueError."""
    decoded = text.decode("utf-8", "surrogateescape").lstrip()  # the shell's bytes after it may be any
    document, end = json.JSONDecoder().raw_decode(decoded)
    return document, decoded[end:].encode("utf-8", "surrogateescape")


def parse_script_output(
    result: CommandResult, *, python: str, timeout_s: float, frame: bytes
) -> ScriptAnswer:
    """The document a framed script printed (``frame``: its frame line), and the shell's output
    around it; raises :class:`HostUnavailable` naming why there is none."""
    if result.timed_out:
        raise HostUnavailable(HostError("timeout", f"the probe did not finish within {timeout_s:g} s"))
    if result.exit_status is None:
        raise HostUnavailable(
            HostError("unreachable", f"the connection was lost while the probe ran: {result.stderr_tail(1)}")
        )
    if result.exit_status in (_NOT_FOUND, _NOT_EXECUTABLE):
        raise HostUnavailable(
            HostError(
                "python_missing",
                f"cannot run {python!r} (exit {result.exit_status}): {result.stderr_tail(1)}; "
                "set --python to the nodes' interpreter",
            )
        )
    if result.exit_status != 0:
        raise HostUnavailable(
            HostError(
                "probe_failed",
                f"the probe exited with status {result.exit_status}: {result.stderr_tail(3)}",
            )
        )
    parts = split_frame(result.stdout, frame)
    try:
        if parts is None:
            raise ValueError("no frame")
        document, after = _document_in(parts[1])
    except ValueError as exc:  # json's errors are ValueErrors
        head = (result.stdout if parts is None else parts[1].lstrip())[:120].decode("utf-8", "replace")
        if result.stdout_cut:
            total = len(result.stdout) + result.stdout_cut
            raise HostUnavailable(
                HostError(
                    "probe_failed",
                    f"the probe printed {total:,} bytes, not one JSON document (a shell profile or "
                    f"a wrapper printing on stdout?); kept its first {binary_size(KEEP_HEAD_BYTES)} and "
                    f"last {binary_size(KEEP_TAIL_BYTES)}: {head!r}",
                )
            ) from None
        reason = "its output had no frame" if parts is None else str(exc)
        raise HostUnavailable(
            HostError("probe_failed", f"the probe printed no JSON ({reason}): {head!r}")
        ) from None
    if not isinstance(document, dict):
        raise HostUnavailable(HostError("probe_failed", f"the probe printed {type(document).__name__}"))
    shell = (parts[0] + after).strip()
    printed = len(shell) + (result.stdout_cut if shell else 0)
    return ScriptAnswer(document, shell, printed)


# Reads exactly LENGTH bytes of script from stdin and runs them as __main__, leaving the rest of
# stdin to the script: a conversation by lines, still without a file on the node.
STREAM_BOOTSTRAP = "import sys;exec(compile(sys.stdin.buffer.read(int(sys.argv[1])),sys.argv[2],'exec'))"


def start_node_script(
    transport: Transport,
    name: str,
    *,
    python: str,
    args: tuple[str, ...] = (),
    timeout_s: float,
    send: Callable[[RemoteProcess, bytes], None] | None = None,
) -> RemoteProcess:
    """Start a node script that talks by lines (its stdin stays open after the source). Its
    ``readline`` reads from after its frame; what the shell printed before is its ``before_frame``.
    ``send`` writes the source (``RemoteProcess.write`` by default): a caller with a silence watch
    sends it watched (:func:`preflight.silence.write_watched`)."""
    source = framed(node_script(name), marker := frame_marker())
    process = transport.start(
        [python, "-c", STREAM_BOOTSTRAP, str(len(source)), f"preflight-{name.rpartition('.')[2]}", *args],
        timeout_s=timeout_s,
    )
    process.frame = marker  # its lines are read from after the frame on
    # A process that ended before it read its source (a wrapper that exits, an interpreter that
    # cannot start) is not an error here: its output and exit status say why.
    with contextlib.suppress(OSError):
        if send is None:
            process.write(source)
        else:
            send(process, source)
    return process
