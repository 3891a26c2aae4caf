"""Running node code on a node: ``preflight.node.facts`` for the facts every check reads, and each
check's own beside it (``checks.ports.node``...).

A node script is a node module (standard library, plus torch/pynvml when the node has them, and
other node modules: :mod:`preflight.bundle`) shipped with the node modules it imports as one
bundle, sent as the stdin of ``python -`` so that nothing is written to the node's disk. It
prints one JSON document, or talks by lines (:func:`start_node_script`).
"""

from __future__ import annotations

import contextlib
import json
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


def node_script(module: str) -> bytes:
    """What is shipped to a node to run the node module ``module`` (dotted) as ``__main__``: its
    bundle (:func:`preflight.bundle.bundle`); nothing is imported here."""
    return bundle(module)


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
    result = transport.run([python, "-", *args], stdin=node_script(name), timeout_s=timeout_s)
    return parse_script_output(result, python=python, host=transport.spec.name, timeout_s=timeout_s)


def parse_script_output(result: CommandResult, *, python: str, host: str, timeout_s: float) -> dict[str, Any]:
    if result.timed_out:
        raise HostUnavailable(
            HostError("timeout", f"{host}: the probe did not finish within {timeout_s:g} s")
        )
    if result.exit_status is None:
        raise HostUnavailable(
            HostError(
                "unreachable", f"{host}: the connection was lost while the probe ran: {result.stderr_tail(1)}"
            )
        )
    if result.exit_status in (_NOT_FOUND, _NOT_EXECUTABLE):
        raise HostUnavailable(
            HostError(
                "python_missing",
                f"{host}: cannot run {python!r} (exit {result.exit_status}): {result.stderr_tail(1)}; "
                "set --python to the nodes' interpreter",
            )
        )
    if result.exit_status != 0:
        raise HostUnavailable(
            HostError(
                "probe_failed",
                f"{host}: the probe exited with status {result.exit_status}: {result.stderr_tail(3)}",
            )
        )
    try:
        document = json.loads(result.stdout)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        head = result.stdout[:120].decode("utf-8", "replace")
        if result.stdout_cut:
            total = len(result.stdout) + result.stdout_cut
            raise HostUnavailable(
                HostError(
                    "probe_failed",
                    f"{host}: the probe printed {total:,} bytes, not one JSON document (a shell profile or "
                    f"a wrapper printing on stdout?); kept its first {binary_size(KEEP_HEAD_BYTES)} and "
                    f"last {binary_size(KEEP_TAIL_BYTES)}: {head!r}",
                )
            ) from None
        raise HostUnavailable(
            HostError("probe_failed", f"{host}: the probe printed no JSON ({exc}): {head!r}")
        ) from None
    if not isinstance(document, dict):
        raise HostUnavailable(
            HostError("probe_failed", f"{host}: the probe printed {type(document).__name__}")
        )
    return document


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
) -> RemoteProcess:
    """Start a node script that talks by lines (its stdin stays open after the source)."""
    source = node_script(name)
    process = transport.start(
        [python, "-c", STREAM_BOOTSTRAP, str(len(source)), f"preflight-{name.rpartition('.')[2]}", *args],
        timeout_s=timeout_s,
    )
    # A process that ended before it read its source (a wrapper that exits, an interpreter that
    # cannot start) is not an error here: its output and exit status say why.
    with contextlib.suppress(OSError):
        process.write(source)
    return process
