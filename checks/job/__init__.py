"""The one training job that ``allreduce`` and ``ddp`` share: the code every node's host and
every rank run (the package ``node``, shipped to the nodes as one bundle), what the job produced
(``outcome``), reading it (``nccl_log``, ``pairs``, ``failures``, ``phase``) and launching it over
SSH (``launch``).

Imports flow one way: node <- outcome <- nccl_log, pairs, failures <- phase, launch. Importing
the package imports none of them.
"""
