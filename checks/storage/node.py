"""Node side of the ``storage`` check: look at the data paths and the checkpoint directory as this
node sees them, leave a marker where it may, and answer the controller by lines.

Self-contained (standard library only, Python 3.8+), never imports preflight. Sent after a length
prefix and talked to by lines, one JSON document each way:

- start (options in argv[1]) -> ``READY {path: what is there, its filesystem, free space, the
  marker this node wrote}``
- ``LOOK {path: [marker names]}`` -> ``SEEN {path: [the names this node sees]}``
- ``WALK [paths]`` -> ``MANIFEST {path: file count, bytes, newest mtime, digests}``
- ``DONE`` (or the end of input, or SIGTERM/SIGHUP) -> markers removed -> ``CLEAN {...}``

A marker is a small file named ``.preflight-<run>-<node>`` written with O_EXCL and fsync'd: the
write test of the checkpoint directory, and the proof of a shared filesystem when another node
sees it. Nothing else is written, and every marker is removed before the script ends.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import signal
import stat
import sys
import time
from typing import Any

MARKER_PREFIX = ".preflight-"
MARKER_BYTES = 64 << 10
HEAD_TAIL_BYTES = 64 << 10
# Filesystems whose content is reached over a network (or a cluster fabric): the same source on
# two nodes is one filesystem.
NETWORK_TYPES = (
    "nfs",
    "nfs4",
    "lustre",
    "gpfs",
    "beegfs",
    "ceph",
    "cifs",
    "smb3",
    "glusterfs",
    "wekafs",
    "orangefs",
    "9p",
    "virtiofs",
    "panfs",
    "fuse.",
)

written: list[str] = []  # markers this process made, removed however it ends


def _error(exc: OSError) -> str:
    return exc.strerror or errno.errorcode.get(exc.errno or 0, str(exc))


def _unescape(field: str) -> str:
    """mountinfo escapes space, tab, newline and backslash as octal."""
    out, i = [], 0
    while i < len(field):
        if field[i] == "\\" and i + 3 < len(field) and field[i + 1 : i + 4].isdigit():
            out.append(chr(int(field[i + 1 : i + 4], 8)))
            i += 4
        else:
            out.append(field[i])
            i += 1
    return "".join(out)


def mount_of(path: str, mountinfo: str) -> dict[str, str]:
    """The mount that holds ``path`` (the longest mount point that prefixes it): point, type, source."""
    best: dict[str, str] = {}
    for line in mountinfo.splitlines():
        left, sep, right = line.partition(" - ")
        fields, rest = left.split(), right.split()
        if not sep or len(fields) < 5 or len(rest) < 2:
            continue
        point = _unescape(fields[4])
        inside = path == point or path.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best.get("mount", "")):
            best = {"mount": point, "type": rest[0], "source": _unescape(rest[1]), "dev": fields[2]}
    return best


def _filesystem(path: str) -> dict[str, Any]:
    found: dict[str, Any] = {}
    try:
        with open("/proc/self/mountinfo", encoding="utf-8", errors="replace") as handle:
            found.update(mount_of(os.path.realpath(path), handle.read()))
    except OSError:
        pass
    try:
        vfs = os.statvfs(path)
        found.update(
            total_bytes=vfs.f_blocks * vfs.f_frsize,
            free_bytes=vfs.f_bavail * vfs.f_frsize,
            free_inodes=vfs.f_favail if vfs.f_files else None,
            read_only=bool(vfs.f_flag & getattr(os, "ST_RDONLY", 1)),
        )
        fsid = getattr(vfs, "f_fsid", None)
        if fsid is not None:
            found["fsid"] = format(fsid, "x")
    except OSError:
        pass
    kind = found.get("type", "")
    found["network"] = any(kind == t or (t.endswith(".") and kind.startswith(t)) for t in NETWORK_TYPES)
    return found


def _write_marker(directory: str, name: str, size: int) -> str | None:
    """Write the marker (``size`` bytes, fsync'd); None when written, else why not."""
    path = os.path.join(directory, name)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except OSError as exc:
        return _error(exc)
    written.append(path)
    try:
        block = os.urandom(4096)
        for _ in range(size // len(block)):
            os.write(fd, block)
        os.fsync(fd)
    except OSError as exc:
        return _error(exc)
    finally:
        os.close(fd)
    return None


def inspect(path: str, role: str, marker: str) -> dict[str, Any]:
    found: dict[str, Any] = {"role": role}
    try:
        info = os.stat(path)
    except OSError as exc:
        found.update(exists=False, error=_error(exc))
        return found
    found["exists"] = True
    found["kind"] = "dir" if stat.S_ISDIR(info.st_mode) else "file" if stat.S_ISREG(info.st_mode) else "other"
    found["device"] = f"{os.major(info.st_dev)}:{os.minor(info.st_dev)}"
    found["filesystem"] = _filesystem(path)
    if found["kind"] == "dir":
        readable = os.access(path, os.R_OK | os.X_OK)
        if not readable:
            found["error"] = "not readable"
        # The checkpoint directory gets a real write; a data set only an empty file to be seen by.
        why = _write_marker(path, marker, MARKER_BYTES if role == "checkpoint" else 0)
        found["marker"] = None if why else marker
        if why:
            found["write_error"] = why
        found["writable"] = why is None
    elif role == "checkpoint":
        found["error"] = "not a directory"
    return found


def seen(path: str, names: list[str]) -> list[str]:
    """The markers visible here. A name not found by its path is looked for in a listing too: a
    network filesystem may remember for a while that a name was missing, a listing asks again."""
    visible = [n for n in names if os.path.exists(os.path.join(path, n))]
    missing = [n for n in names if n not in visible]
    if missing:
        try:
            listed = set(n for n in os.listdir(path) if n.startswith(MARKER_PREFIX))
        except OSError:
            listed = set()
        visible += [n for n in missing if n in listed]
    return visible


def _sample_digest(path: str, size: int) -> str:
    digest = hashlib.sha256(str(size).encode())
    with open(path, "rb") as handle:
        digest.update(handle.read(HEAD_TAIL_BYTES))
        if size > 2 * HEAD_TAIL_BYTES:
            handle.seek(size - HEAD_TAIL_BYTES)
        digest.update(handle.read(HEAD_TAIL_BYTES))
    return digest.hexdigest()[:16]


def manifest(root: str, max_files: int, timeout_s: float, sample_files: int) -> dict[str, Any]:
    """What a copy holds, in an order every node walks alike: file count, total bytes, the newest
    file, a digest of every (path, size), and the content (head and tail) of a sample of files
    chosen by a hash of their path, so that a missing file does not shift the sample."""
    started = time.monotonic()
    entries: list[Any] = []  # (relative path, size, mtime)
    found: dict[str, Any] = {"truncated": False, "incomplete": False}
    errors = 0
    if os.path.isfile(root):
        info = os.stat(root)
        entries.append(("", info.st_size, info.st_mtime))
    for directory, dirs, files in os.walk(root, onerror=lambda exc: None):
        dirs.sort()
        dirs[:] = [d for d in dirs if not d.startswith(MARKER_PREFIX)]
        for name in sorted(files):
            if name.startswith(MARKER_PREFIX):
                continue
            full = os.path.join(directory, name)
            try:
                info = os.stat(full)
            except OSError:
                errors += 1
                continue
            entries.append((os.path.relpath(full, root), info.st_size, info.st_mtime))
            if len(entries) >= max_files:
                found["truncated"] = True
                break
            if len(entries) % 1000 == 0 and time.monotonic() - started > timeout_s:
                found["incomplete"] = True
                break
        if found["incomplete"]:
            break
        if found["truncated"]:
            break
        if time.monotonic() - started > timeout_s:
            found["incomplete"] = True
            break
    listing = hashlib.sha256()
    for rel, size, _ in entries:
        listing.update(f"{rel}\0{size}\n".encode("utf-8", "surrogateescape"))
    newest = max(entries, key=lambda e: e[2]) if entries else None
    chosen = sorted(entries, key=lambda e: hashlib.sha256(e[0].encode("utf-8", "surrogateescape")).digest())
    samples: dict[str, str] = {}
    for rel, size, _ in chosen[:sample_files]:
        try:
            samples[rel] = _sample_digest(os.path.join(root, rel) if rel else root, size)
        except OSError as exc:
            samples[rel] = "unreadable: " + _error(exc)
    found.update(
        files=len(entries),
        bytes=sum(e[1] for e in entries),
        newest_mtime=newest[2] if newest else None,
        newest=newest[0] if newest else None,
        listing=listing.hexdigest()[:16],
        samples=samples,
        unreadable=errors,
        seconds=round(time.monotonic() - started, 3),
    )
    return found


def clean() -> list[str]:
    """Remove every marker this process wrote; what could not be removed, with why."""
    left = []
    while written:
        path = written.pop()
        try:
            os.unlink(path)
        except FileNotFoundError:
            pass
        except OSError as exc:
            left.append(f"{path}: {_error(exc)}")
    return left


def _reply(tag: str, document: Any) -> None:
    sys.stdout.write(f"{tag} {json.dumps(document)}\n")
    sys.stdout.flush()


def _on_signal(signum: int, frame: Any) -> None:
    clean()
    os._exit(128 + signum)


def main(argv: list[str]) -> int:
    options = json.loads(argv[0]) if argv else {}
    for signum in (signal.SIGTERM, signal.SIGHUP, signal.SIGINT):
        signal.signal(signum, _on_signal)
    marker = MARKER_PREFIX + str(options.get("marker", "x"))
    paths: dict[str, str] = {p: "data" for p in options.get("data", [])}
    if options.get("checkpoint"):
        paths[options["checkpoint"]] = "checkpoint"
    try:
        _reply("READY", {p: inspect(p, role, marker) for p, role in paths.items()})
        for line in sys.stdin:
            command, _, rest = line.strip().partition(" ")
            if command == "LOOK":
                wanted = json.loads(rest)
                _reply("SEEN", {p: seen(p, names) for p, names in wanted.items()})
            elif command == "WALK":
                _reply(
                    "MANIFEST",
                    {
                        p: manifest(
                            p,
                            int(options.get("max_files", 100000)),
                            float(options.get("walk_timeout_s", 30)),
                            int(options.get("sample_files", 16)),
                        )
                        for p in json.loads(rest)
                    },
                )
            elif command == "DONE":
                break
    finally:
        left = clean()
    _reply("CLEAN", {"left": left})
    return 0


if __name__ == "__main__":
    # Started through the stream bootstrap (python -c BOOTSTRAP LENGTH NAME OPTIONS) or as a file.
    sys.exit(main(sys.argv[3:] if sys.argv[0] == "-c" else sys.argv[1:]))
