"""The one training job that ``allreduce`` and ``ddp`` share: the script every node's host and
every rank run (``node``), what the job produced (``outcome``), reading it (``nccl_log``, ``pairs``,
``failures``, ``phase``), launching it over SSH (``launch``), and the settings it runs with,
which the checks judging it declare (``settings``).

Imports flow one way: node <- outcome <- nccl_log, pairs, failures <- phase, launch. Importing
the package imports none of them (``checks.job.node`` is read as a file and shipped to nodes).
"""
