"""benchmarks/history_scale.py on a small store: the store it fills is the one ``preflight
history`` reads (parts by their identities, a node that failed with different GPUs a repeat offender,
a sparse plan's pairs), and it prints one line per backend with its times."""

from __future__ import annotations

import re
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from benchmarks import history_scale
from preflight.history.queries import Filters, offenders
from preflight.history.settings import iso
from preflight.history.store import open_store


def test_the_filled_store_holds_every_part_and_answers_preflight_history(tmp_path: Path) -> None:
    base = history_scale.template(20)
    assert len(base.parts) == 20
    gpus = {p.part for parts in base.parts.values() for p in parts if p.kind == "gpu"}
    hcas = {p.part for parts in base.parts.values() for p in parts if p.kind == "hca"}
    assert len(gpus) == 20 * history_scale.GPUS and len(hcas) == 20 * 9  # distinct identities
    store = open_store(str(tmp_path / "history.sqlite"))
    try:
        start = datetime(2026, 1, 1, tzinfo=UTC)
        history_scale.fill(store, base, 10, start)
        assert store.query("SELECT COUNT(*) FROM runs") == [(10,)]
        assert store.query("SELECT COUNT(*) FROM rates WHERE metric = 'tflops'") == [(10 * 20 * 8,)]
        # A sparse plan: a few pairs a node, each once a run under its sorted names.
        for number in range(10):
            pairs = history_scale.pairs_of(list(base.parts), number)
            assert len(set(pairs)) == len(pairs) and all(a < b for a, b in pairs)
            assert 20 <= len(pairs) <= 20 * history_scale.PAIR_STRIDES
        (pairs_kept,) = store.query("SELECT COUNT(*) FROM rates WHERE metric = 'pair_busbw'")[0]
        assert pairs_kept == sum(len(history_scale.pairs_of(list(base.parts), n)) for n in range(10))
        found = offenders(store, Filters(since=iso(start)))
        assert any(o.by == "node" for o in found)  # a node failed with different GPUs
    finally:
        store.close()


def test_it_prints_the_query_and_the_write_time(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["history_scale.py", "--backend", "sqlite", "--nodes", "5", "--runs", "4", "--repeat", "1"]
    monkeypatch.setattr(sys, "argv", argv)
    history_scale.main()
    line = capsys.readouterr().out.strip()
    assert re.fullmatch(
        r"sqlite +5 nodes x 8 GPUs \(85 parts a run\) x 4 runs \(filled in \d+ s\): "
        r"preflight history \d+\.\d\d s \(\d+ rows; --pairs \d+\.\d\d s, \d+ rows\), "
        r"one run's write \d+\.\d\d s, "
        r"its report's history key \d+\.\d\d s; "
        r"the own-past rule \d+\.\d\d s \(its last 30 runs a rate\), "
        r"reading the window's every value as before \d+\.\d\d s: \d+\.\dx",
        line,
    ), line


def test_a_kept_store_is_filled_once_and_measured_on_a_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    kept = tmp_path / "kept.sqlite"
    argv = ["history_scale.py", "--backend", "sqlite", "--nodes", "4", "--runs", "3", "--repeat", "1"]
    monkeypatch.setattr(sys, "argv", [*argv, "--store", str(kept)])
    history_scale.main()
    filled = kept.stat().st_mtime_ns
    history_scale.main()
    assert kept.stat().st_mtime_ns == filled  # reused: the timed writes went to its copy
    store = open_store(str(kept))
    try:
        assert store.query("SELECT COUNT(*) FROM runs") == [(3,)]
    finally:
        store.close()
    # Another size fills it again.
    monkeypatch.setattr(sys, "argv", [*argv[:-4], "--runs", "2", "--repeat", "1", "--store", str(kept)])
    history_scale.main()
    assert len(capsys.readouterr().out.strip().splitlines()) == 3
    store = open_store(str(kept))
    try:
        assert store.query("SELECT COUNT(*) FROM runs") == [(2,)]
    finally:
        store.close()
