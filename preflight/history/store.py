"""Opening the store and writing to it: SQLite through :mod:`sqlite3`, or PostgreSQL through
psycopg 3 (the ``postgres`` extra) for a target that starts ``postgresql://``.

Both take the same statements, written with ``?`` placeholders (turned into ``%s`` for psycopg).
SQLite runs in WAL mode with a busy timeout, so that two runs writing at once both land: one
waits for the other. Every failure to open, read or write is a :class:`HistoryError` with one
line that says why; a run turns it into a warning, ``preflight history`` into an error.
"""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Protocol

from preflight.errors import PreflightError
from preflight.history.joins import join_legacy_names
from preflight.history.schema import (
    JOIN_NAMES_AT,
    META,
    SCHEMA_VERSION,
    SchemaTooNew,
    placeholders,
    statements,
)

BUSY_TIMEOUT_S = 10.0
SCHEMA_LOCK = 0x70726566  # PostgreSQL's advisory lock key for migrations
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


class HistoryError(PreflightError):
    """The store cannot be opened, read or written: locked, corrupt, full, unwritable, unreachable."""


class _Cursor(Protocol):
    def execute(self, sql: Any, params: Sequence[Any] = ...) -> Any: ...
    def executemany(self, sql: Any, params: Any) -> Any: ...
    def fetchall(self) -> list[Any]: ...
    def fetchone(self) -> Any: ...


class Store:
    """An open store: statements with ``?`` placeholders, run in transactions."""

    def __init__(self, connection: Any, dialect: str, target: str) -> None:
        self.connection = connection
        self.dialect = dialect
        self.target = target

    def _sql(self, sql: str) -> str:
        return sql.replace("?", "%s") if self.dialect == "postgresql" else sql

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        try:
            cursor: _Cursor = self.connection.cursor()
            cursor.execute(self._sql(sql), tuple(params))
            return [tuple(row) for row in cursor.fetchall()]
        except Exception as exc:
            raise self._error("read", exc) from exc

    def execute(self, sql: str, params: Sequence[Any] = ()) -> None:
        try:
            self.connection.cursor().execute(self._sql(sql), tuple(params))
        except Exception as exc:
            raise self._error("write", exc) from exc

    def insert_returning_id(self, sql: str, params: Sequence[Any]) -> int:
        """Run an INSERT ... RETURNING id and give the id."""
        try:
            cursor: _Cursor = self.connection.cursor()
            cursor.execute(self._sql(sql), tuple(params))
            return int(cursor.fetchone()[0])
        except Exception as exc:
            raise self._error("write", exc) from exc

    def insert_many(self, table: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        if not rows:
            return
        try:
            if self.dialect == "postgresql":
                # COPY: one stream for all the rows, many times faster than INSERTs for a run's parts.
                cursor = self.connection.cursor()
                with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
                    for row in rows:
                        copy.write_row(tuple(row))
                return
            marks = placeholders(columns)
            sql = f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})"
            self.connection.cursor().executemany(sql, [tuple(r) for r in rows])
        except Exception as exc:
            raise self._error("write", exc) from exc

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """Everything inside lands together or not at all (psycopg opens the transaction itself)."""
        try:
            yield
            self.connection.commit()
        except BaseException as exc:
            with suppress(Exception):  # a connection already broken has nothing to roll back
                self.connection.rollback()
            if isinstance(exc, HistoryError) or not isinstance(exc, Exception):
                raise
            raise self._error("write", exc) from exc

    def close(self) -> None:
        with suppress(Exception):  # closing a broken connection: nothing more to lose
            self.connection.close()

    def _error(self, doing: str, exc: Exception) -> HistoryError:
        return HistoryError(f"history store {self.target}: cannot {doing}: {_reason(exc)}")

    def schema_version(self) -> int:
        found = self.query("SELECT value FROM meta WHERE key = 'schema_version'")
        return int(found[0][0]) if found else 0

    def migrate(self) -> None:
        """Bring the schema to :data:`SCHEMA_VERSION`, one migration per transaction."""
        with self.transaction():
            self._lock_schema()
            self.execute(META)
        current = self.schema_version()
        if current > SCHEMA_VERSION:
            raise HistoryError(
                f"history store {self.target}: schema version {current} is newer than this "
                f"preflight's ({SCHEMA_VERSION})"
            ) from SchemaTooNew()
        for version in range(current + 1, SCHEMA_VERSION + 1):
            with self.transaction():
                # Another writer may have migrated meanwhile: the lock is held from here on.
                self._lock_schema()
                if self.schema_version() >= version:
                    continue
                for statement in statements(version, self.dialect):
                    self.execute(statement)
                if version == JOIN_NAMES_AT:
                    join_legacy_names(self)
                self.execute("DELETE FROM meta WHERE key = 'schema_version'")
                self.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(version),))

    def _lock_schema(self) -> None:
        """Hold off other writers' migrations until this transaction ends (SQLite's ``BEGIN
        IMMEDIATE`` already does; PostgreSQL takes a lock for it)."""
        if self.dialect == "postgresql":
            self.query("SELECT pg_advisory_xact_lock(?)", (SCHEMA_LOCK,))


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def is_postgres(target: str) -> bool:
    return target.startswith(POSTGRES_SCHEMES)


def open_store(target: str, *, create: bool = True) -> Store:
    """The store at ``target`` (a path, or a ``postgresql://`` URL), migrated to this schema.
    ``create`` false: a SQLite file that does not exist is a :class:`HistoryError`, not made."""
    store = _connect_postgres(target) if is_postgres(target) else _connect_sqlite(target, create=create)
    try:
        store.migrate()
    except BaseException:
        store.close()
        raise
    return store


def _connect_sqlite(target: str, *, create: bool) -> Store:
    path = Path(target).expanduser()
    if not create and not path.exists():
        raise HistoryError(f"history store {target}: no such file (no run has written to it)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        connection = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
        connection.execute(f"PRAGMA busy_timeout = {int(BUSY_TIMEOUT_S * 1000)}")
        _write_ahead(connection)
        connection.execute("PRAGMA foreign_keys = ON")
        connection.execute("PRAGMA synchronous = NORMAL")
    except (OSError, sqlite3.Error) as exc:
        raise HistoryError(f"history store {target}: cannot open: {_reason(exc)}") from exc
    return _SqliteStore(connection, "sqlite", target)


def _write_ahead(connection: sqlite3.Connection) -> None:
    """Put the file in WAL mode. SQLite answers "database is locked" at once, without waiting out
    the busy timeout, while another writer is creating the same new file: tried again until the
    timeout."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            connection.execute("PRAGMA journal_mode = WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


class _SqliteStore(Store):
    """SQLite in autocommit mode, with transactions begun explicitly (``BEGIN IMMEDIATE``)."""

    @contextmanager
    def transaction(self) -> Iterator[None]:
        try:
            self.connection.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as exc:
            raise self._error("write", exc) from exc
        try:
            yield
            self.connection.execute("COMMIT")
        except BaseException as exc:
            with suppress(sqlite3.Error):  # nothing begun, or the connection is broken
                self.connection.execute("ROLLBACK")
            if isinstance(exc, HistoryError) or not isinstance(exc, Exception):
                raise
            raise self._error("write", exc) from exc


def _connect_postgres(target: str) -> Store:
    try:
        import psycopg
    except ImportError:
        raise HistoryError(
            f"history store {_safe(target)}: PostgreSQL needs psycopg 3 (pip install 'preflight[postgres]')"
        ) from None
    try:
        connection = psycopg.connect(target, connect_timeout=int(BUSY_TIMEOUT_S))
    except Exception as exc:
        raise HistoryError(f"history store {_safe(target)}: cannot connect: {_reason(exc)}") from exc
    return Store(connection, "postgresql", _safe(target))


def _safe(target: str) -> str:
    """A URL without its password, for messages."""
    scheme, sep, rest = target.partition("://")
    user, at, host = rest.rpartition("@")
    if not at:
        return target
    return f"{scheme}{sep}{user.split(':')[0]}@{host}"
