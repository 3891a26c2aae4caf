"""A throwaway PostgreSQL server for the history store's tests and benchmark: Debian's
``postgresql`` binaries run as the ``postgres`` user on a free loopback port, its data in a
temporary folder removed afterwards. Needs root (tests/run.sh installs the package)."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

PG_BIN = Path("/usr/lib/postgresql")


class PostgresUnavailable(RuntimeError):
    """No PostgreSQL server binaries here, or not root."""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def postgres_server(also_on: Sequence[str] = ()) -> Iterator[str]:
    """A server for the duration of the block; its URL (``postgresql://postgres@127.0.0.1:PORT/postgres``).
    ``also_on``: more addresses it listens on, each open to its /24 (a lab's bridge address, for
    the lab nodes' own runs)."""
    initdb = sorted(PG_BIN.glob("*/bin/initdb"))
    if not initdb or os.geteuid() != 0:
        raise PostgresUnavailable("PostgreSQL server binaries (Debian postgresql) and root are needed")
    bindir = initdb[-1].parent
    data = Path(tempfile.mkdtemp(prefix="preflight-pg-"))
    shutil.chown(data, "postgres", "postgres")
    port = _free_port()

    def as_postgres(*command: str) -> None:
        subprocess.run(["runuser", "-u", "postgres", "--", *command], check=True, capture_output=True)

    as_postgres(str(bindir / "initdb"), "-D", str(data / "db"), "--auth=trust", "-U", "postgres")
    with (data / "db" / "pg_hba.conf").open("a") as hba:
        hba.writelines(f"host all all {address.rsplit('.', 1)[0]}.0/24 trust\n" for address in also_on)
    listen = ",".join(["127.0.0.1", *also_on])
    as_postgres(
        str(bindir / "pg_ctl"), "-D", str(data / "db"), "-w", "-l", str(data / "log"),
        "-o", f"-p {port} -k {data} -c listen_addresses={listen}", "start",
    )  # fmt: skip
    try:
        yield f"postgresql://postgres@127.0.0.1:{port}/postgres"
    finally:
        as_postgres(str(bindir / "pg_ctl"), "-D", str(data / "db"), "-m", "immediate", "stop")
        shutil.rmtree(data, ignore_errors=True)
