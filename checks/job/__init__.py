"""The one training job that ``allreduce``, ``ddp``, ``compute``, ``intranode`` and ``rails``
share: the code every node's host and every rank run (the package ``node``, shipped to the nodes
as one bundle), its phases (registered in ``phases``, each declared beside its check as a
``declaration.JobPhase``), what the job produced (``outcome``), reading it (``nccl_log``,
``pairs``, ``failures``, ``phase``), launching it over SSH or srun (``launch``), and the settings
it runs with, which the checks judging it declare (``settings``).

Imports flow one way: node, settings <- declaration <- phases <- outcome <- nccl_log, pairs,
failures <- phase, launch. Importing the package imports none of them.
"""
