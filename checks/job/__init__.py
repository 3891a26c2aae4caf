"""The one training job that ``allreduce`` and ``ddp`` share: the script every node's host and
every rank run (``node``), what the job produced (``outcome``), reading it (``nccl_log``, ``pairs``,
``failures``, ``phase``) and launching it over SSH (``launch``).

Imports flow one way: node <- outcome <- nccl_log, pairs, failures <- phase, launch. Importing
the package imports none of them (``checks.job.node`` is read as a file and shipped to nodes).
"""
