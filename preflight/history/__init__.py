"""Memory across runs: every run's nodes, parts, versions, findings and rates in one store.

:mod:`.store` opens the store (SQLite by default, PostgreSQL for a site whose prologs share one),
:mod:`.schema` declares its tables and migrations (:mod:`.joins`: the names a store of schema 3 or
older kept one node under), :mod:`.record` turns a run into rows and :mod:`.write` writes them and
forgets old runs, :mod:`.queries` reads them back (repeat offenders, flaky findings, trends),
:mod:`.annotate` tells a run's findings what failed before (:mod:`.spread`: how far below its own
past a rate must fall), :mod:`.local` compares a node with its last full run,
:mod:`.report_section` is the report's ``history`` key (:mod:`.drawn`: which of its trends a report
draws), :mod:`.session` is a run's use of the store, :mod:`.settings` its ``[history]`` section,
and :mod:`.command` is ``preflight history``.
"""
