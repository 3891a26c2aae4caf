"""Memory across runs: every run's nodes, parts, versions, findings and rates in one store.

:mod:`.store` opens the store (SQLite by default, PostgreSQL for a site whose prologs share one),
:mod:`.schema` declares its tables and migrations, :mod:`.record` turns a run into rows,
:mod:`.queries` reads them back (repeat offenders, flaky findings, trends), :mod:`.annotate` tells
a run's findings what failed before, :mod:`.local` compares a node with its last full run,
:mod:`.report_section` is the report's ``history`` key (:mod:`.drawn`: which of its trends a report
draws), and :mod:`.command` is ``preflight history``.
"""
