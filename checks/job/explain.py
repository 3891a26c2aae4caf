"""What the items any check judged in the job may carry mean (``preflight explain job/ITEM``):
declared once, under ``job`` (``checks.shared_explanations``), and found for whichever of the job's
checks reports them: why the job could not start (``checks.job.launch``, ``checks.job.layout``,
``checks.job.outcome``), the nodes that failed in it and a phase's errors (``checks.job.failures``),
and a phase that gave no results (``checks.job.phase``)."""

from __future__ import annotations

from preflight.explain import Explanation

EXPLAINS = (
    Explanation(
        item="torch",
        means=(
            "On some nodes the interpreter preflight runs cannot import torch, so the job (the compute "
            "burn, the all-reduce, the rails, DDP) cannot start anywhere, and nothing it measures is "
            "known. Usually preflight was pointed at another Python than the training environment's; "
            "it says nothing of the node's health."
        ),
        measured=(
            "The facts probe imports torch with the run's interpreter (`--python`, `[run] python`) on "
            "every node before the job; the nodes where the import failed are named, with the error."
        ),
        threshold="",
        first=(
            "Point `--python` at the training environment's interpreter (its venv's or conda env's "
            "`bin/python`), or install torch there; check on the node with `PYTHON -c 'import torch; "
            "print(torch.__version__)'`."
        ),
        healthy="torch imports on every node, the same version everywhere (the versions check shows it).",
    ),
    Explanation(
        item="cuda",
        means=(
            "Nodes list GPUs but torch sees no CUDA device on them: a CPU-only build of torch, "
            "CUDA_VISIBLE_DEVICES hiding them, or a driver the build cannot use. The job would measure "
            "the CPU instead of the GPUs, so it is not started."
        ),
        measured=(
            "From the facts probe, where every node lists GPUs (NVML or nvidia-smi) or `--backend nccl` "
            "asks for them: torch's `torch.cuda.is_available()` and device count with the run's "
            "interpreter. A node where torch "
            "counts none is named, with its CUDA_VISIBLE_DEVICES where set. `--backend gloo` runs the "
            "job on the CPU instead."
        ),
        threshold="",
        first=(
            "On the node, `PYTHON -c 'import torch; print(torch.__version__, torch.version.cuda, "
            "torch.cuda.is_available())'`: a `+cpu` build or no CUDA version needs a CUDA build of "
            "torch. Check `CUDA_VISIBLE_DEVICES` and that `nvidia-smi` works. To test only the CPU path, "
            "pass `--backend gloo`."
        ),
        healthy="torch sees every listed GPU on every node.",
    ),
    Explanation(
        item="slots",
        means=(
            "The hosts file asks for more ranks on a node (`slots=N`) than torch sees CUDA devices "
            "there: ranks would share a GPU or fail to start, so the job is not launched."
        ),
        measured=(
            "Each host's `slots=` in the hosts file against the CUDA devices torch counts there with "
            "the run's interpreter (which CUDA_VISIBLE_DEVICES limits), from the facts probe."
        ),
        threshold="",
        first=(
            "Set `slots=` to the node's GPU count in the hosts file, or drop it (the job then runs one "
            "rank for each GPU torch sees); or find why torch sees fewer GPUs than expected "
            "(`CUDA_VISIBLE_DEVICES`, `nvidia-smi -L`)."
        ),
        healthy="No node asks for more slots than it has CUDA devices.",
    ),
    Explanation(
        item="gpu_fabric",
        means=(
            "GPUs on some nodes have not registered with their NVSwitch fabric, so CUDA cannot start on "
            "them and the job would only fail there: it is not launched. Reported by the job's checks "
            "when the hardware check is not in the run; otherwise they skip and point at its "
            "`gpu_fabric` finding."
        ),
        measured=(
            "From the facts probe, each GPU's fabric registration state (NVML's GPU fabric info, or "
            "nvidia-smi's): a GPU whose state is not started or in progress is named, with its node."
        ),
        threshold="",
        first=(
            "On the node, `systemctl status nvidia-fabricmanager` and its log; restart the fabric "
            "manager. If the GPUs stay unregistered, drain the node and reset the GPUs and NVSwitches or "
            "reboot it. Run with the hardware check for its full finding."
        ),
        healthy="Every GPU's fabric state completed, with status Success.",
    ),
    Explanation(
        item="job_not_run",
        means=(
            "This check did not run because the job it shares with the other job checks did not start. "
            "The reason is told once, by the first of them in the run (named in `see`); this finding is "
            "no fault of its own."
        ),
        measured=(
            "The job's checks (compute, intranode, rails, allreduce, ddp) share one job. When it cannot "
            "start (no torch or CUDA, too many slots, GPUs off their fabric, a port it needs blocked, no "
            "reachable node), the first of them in the run reports why and the others skip with this "
            "item."
        ),
        threshold="",
        first=(
            "Read the finding of the check named in `see`, and fix what it names; this check runs again "
            "with the job."
        ),
        healthy="The job starts, and each of its checks reports its own result.",
    ),
    Explanation(
        item="job_not_started",
        means=(
            "The job was launched, but preflight could not start its process on some node, so the job's "
            "checks report this instead of any result. The node answered the facts probe earlier in "
            "the run; it failed or stopped answering since."
        ),
        measured=(
            "The job's host process is started on every node over its SSH connection and sent the "
            "job. A node where the start fails (the connection refused or lost, the script not "
            "started) or that goes silent while the job is being sent is named with the error. The "
            "first job check in the run reports it; the others skip with `job_not_run`."
        ),
        threshold=(
            "A node that sends nothing while the job is sent to it is silent after {run.silence_s} seconds."
        ),
        first=(
            "Read the error in the finding and open an SSH session to the node as preflight does (same "
            "user, key and `--ssh-config`). Check that it is up and not overloaded (its load, its free "
            "memory), then run again."
        ),
        healthy="The job's process starts on every node, and every job check reports its own result.",
    ),
    Explanation(
        item="job_hosts_unreachable",
        means=(
            "The job was not launched because the nodes it needs could not be checked: no node was "
            "reachable, or the master node (rank 0's, which hosts the rendezvous) was not among the "
            "nodes that answered. The cause is told by the connect check's findings."
        ),
        measured=(
            "Before the job starts, preflight takes the nodes that answered the connect check and the "
            "facts probe. The master is `[ports] master_addr` where set (matched against the nodes' "
            "names and addresses), else the first host; the job is not launched when it is not one of "
            "those nodes, or when there are none."
        ),
        threshold="",
        first=(
            "Fix what the connect check names for the master or the nodes (unreachable, refused key, no "
            "Python). If `[ports] master_addr` is set, check that it is the name or address of a node "
            "in the hosts file."
        ),
        healthy="The master and the other nodes answer, and the job is launched on all of them.",
    ),
    Explanation(
        item="job_blocked",
        means=(
            "The job was not launched because another check found something that would make it fail: "
            "the ports check found the master's rendezvous port blocked from some node, or the "
            "hardware check found GPUs not registered with their NVSwitch fabric. That check's "
            "finding (named in `blocked_by`) tells the cause once; this one is no fault of its own."
        ),
        measured=(
            "Before the launch, the ports check's findings are read for a blocked port the job needs "
            "(the master's rendezvous port), and the facts probe for GPUs off their fabric when the "
            "hardware check is in the run. Either stops the launch."
        ),
        threshold="",
        first=(
            "Read the finding of the check named in `blocked_by` and fix what it names (a firewall or "
            "security-group rule for the port; the fabric manager for the GPUs); the job runs with the "
            "next run."
        ),
        healthy="No port the job needs is blocked, every GPU's fabric state is complete, and the job starts.",
    ),
    Explanation(
        item="node_lost",
        means=(
            "A node stopped answering during the job: no heartbeat, no output and no answer on its "
            "SSH connection, or its connection dropped before it reported an exit status. A training "
            "job on it would hang, then time out on every other node. The job is then ended on the "
            "others; after the phase's results were in (at teardown) this is a warning and the results "
            "stand."
        ),
        measured=(
            "Every rank sends a heartbeat every 2 seconds; a node quiet for 3 seconds is asked an SSH "
            "keepalive. It is silent once it has sent nothing for the silence time and its keepalive "
            "went unanswered while other nodes answered (a controller that is itself stalled names "
            "nobody). The finding gives how long it was silent, since when (UTC) and the phase its "
            "last heartbeat named."
        ),
        threshold="Silent after {run.silence_s} seconds without output and an unanswered keepalive.",
        first=(
            "Ping the node and open an SSH session to it; if it does not answer, look at its console "
            "(BMC) and drain it. If it answers, look around the time given: `dmesg -T` for a hung task, "
            "an Xid or a link down, `ip -s link` and `ibstat` for its ports, and its load."
        ),
        healthy="Every node beats every 2 seconds until the job ends, and its connection stays up.",
    ),
    Explanation(
        item="never_joined",
        means=(
            "A node's ranks never joined the job's process group, so the job could not start its "
            "collectives and the other nodes waited for it. Usually the node cannot reach the "
            "master's rendezvous port (a firewall, a wrong address or interface), or it never "
            "started its ranks."
        ),
        measured=(
            "From each failed node's stderr: torch's store errors saying its ranks could not connect "
            "to the master's address and port (refused, or no connection within the wait). Else the "
            "master's count of nodes that joined short of the job's (`2/3 clients joined`), which "
            "names the nodes that show no sign of joining; or a node that started no rank and fell "
            "silent while the others sent heartbeats."
        ),
        threshold=(
            "The ranks have {allreduce.join_timeout_s} seconds to reach the master and form the process "
            "group; a node that sends nothing is silent after {run.silence_s} seconds."
        ),
        first=(
            "From the named node, test the master's port: `nc -zv MASTER PORT` (the run's `[run] port`). "
            "Connection refused: nothing listens there (the master's ranks failed first, or the address "
            "is another machine's). No answer: a firewall or security group drops it. Run the ports "
            "check (`--only ports`) and check `GLOO_SOCKET_IFNAME`/`NCCL_SOCKET_IFNAME`."
        ),
        healthy="Every node's ranks join within seconds of each other, and the master counts every node.",
    ),
    Explanation(
        item="missed_barrier",
        means=(
            "Ranks on a node never reached the barrier every rank passes at the start of the DDP "
            "phase: they were stuck in something earlier (a hung GPU, a collective that never "
            "returned, a busy or stopped process). In a training job the same node would stall every "
            "step; the node that reported it only waited."
        ),
        measured=(
            "At the start of the DDP phase every rank enters gloo's `monitored_barrier` (on a gloo group "
            "beside NCCL), which waits for all ranks and names those that did not arrive (`Ranks 4, 5 "
            "failed to pass monitoredBarrier`). The ranks are placed on their nodes from the ranks' "
            "start lines; read from a failed node's stderr or from the phase's error."
        ),
        threshold="The barrier waits {allreduce.collective_timeout_s} seconds for every rank.",
        first=(
            "On the named node, `nvidia-smi` and `dmesg -T | grep -i xid` for a hung GPU, and its link. "
            "If its ranks are still there (`pgrep -l preflight-rank`), `py-spy dump --pid PID` (where "
            "installed) shows where they are stuck. Drain it if a GPU is hung."
        ),
        healthy="Every rank reaches the barrier, and the DDP phase goes on to train.",
    ),
    Explanation(
        item="killed_by_signal",
        means=(
            "A rank on the node (or the node's job process) was ended by a signal: SIGKILL from outside "
            "the job (the out-of-memory killer, a cluster agent, a person), or a crash in native code "
            "(SIGSEGV, SIGBUS, SIGABRT from CUDA or NCCL). A training job on it would die the same way. "
            "After the phase's results were in, this is a warning and the results stand."
        ),
        measured=(
            "The node's rank host writes an end record for its first failed rank with the signal that "
            'ended it; for ranks torchrun started, its "Root Cause" block (`Signal 9 (SIGKILL)`); or '
            "the node's job process itself ended by a signal. A node whose stderr shows it waited on a "
            "peer (a timeout, a lost connection) is not named this way."
        ),
        threshold="",
        first=(
            "On the node, `dmesg -T | grep -iE 'killed process|out of memory|segfault|xid'` and "
            "`journalctl -k` around the job's time. For SIGKILL, check the memory limit of the job's "
            "cgroup or container and what else ran there. A SIGSEGV or SIGBUS beside an Xid points at "
            "the GPU or its driver: drain the node."
        ),
        healthy="Every rank exits 0 on its own; no signal ends any of them.",
    ),
    Explanation(
        item="node_crashed",
        means=(
            "A node's ranks failed on their own, with a non-zero exit status that no peer caused: an "
            "exception (a CUDA error, an import error, an error of the job's code), quoted in the "
            "finding. A training job on the node would fail the same way. After the phase's results "
            "were in, this is a warning and the results stand."
        ),
        measured=(
            "A node whose job process ended with a non-zero status, not ended by preflight, whose "
            "stderr shows no wait on a peer (a timeout, a lost connection, a barrier). The finding "
            "quotes the last exception line in its stderr, else the last line that is not noise, with "
            "its exit status."
        ),
        threshold="",
        first=(
            "Read the quoted error (each node's is in `details.failures`). A CUDA or NCCL error: "
            "`nvidia-smi` and `dmesg -T | grep -i xid` on the node. An import or version error: compare "
            "the versions check's finding for the node. Run again: an error that follows the node is "
            "the node's; drain it for a hardware error."
        ),
        healthy="Every node's ranks exit 0.",
    ),
    Explanation(
        item="job_timed_out",
        means=(
            "Nodes were still running when the job's deadline came, and no node reported an error or "
            "went silent: something hung without failing (a rank stuck in a CUDA call, or waiting where "
            "no timeout applies), or the run had too little time left for the job. The nodes named are "
            "those still running; none is known to be the cause."
        ),
        measured=(
            "The controller watches the job to its deadline: a fixed 40 seconds for its start, the join's "
            "and one collective's timeout, and each phase's own budget, cut short to the time the run "
            "has left. Nodes still running then are ended; they are named only when no node failed "
            "otherwise."
        ),
        threshold=(
            "The deadline adds {allreduce.join_timeout_s} and {allreduce.collective_timeout_s} to the "
            "fixed start and the phases' budgets, and is never past the run's {run.timeout_s}."
        ),
        first=(
            "If the run's time was mostly spent before the job (many nodes, slow probes), raise "
            "`[run] timeout_s` (`--timeout`). Otherwise run again; if the same nodes hang, look at their "
            "ranks while they do (`py-spy dump --pid PID`, `nvidia-smi`, `dmesg -T | grep -i xid`)."
        ),
        healthy="The job ends on every node well before its deadline.",
    ),
    Explanation(
        item="phase_error",
        means=(
            "A phase raised an error on some ranks, of their own and not from waiting on a peer, so "
            "the phase has no results: the error is quoted, with the first failed rank's node. An "
            "error before any phase (joining the world, importing torch or the phases on a node) is "
            "reported this way too, as is a phase not run because the process group stopped answering."
        ),
        measured=(
            "Each rank runs the phase inside a guard; after it, the ranks gather each other's errors, "
            "so all agree, and rank 0's document keeps them by phase (`phase_errors`). The finding "
            "names the first failed rank's node and quotes up to four ranks' errors in "
            "`details.phase_error`, then a count of the rest."
        ),
        threshold="",
        first=(
            "Read the errors in `details.phase_error`. On the node named: `nvidia-smi` for other "
            "processes on its GPUs (out of memory), `dmesg -T | grep -i xid` (an illegal access, a GPU "
            "fault); a missing module or version error: the versions check. Run again: an error that "
            "follows the node is the node's."
        ),
        healthy="Rank 0's document has results for every phase and an empty `phase_errors`.",
    ),
    Explanation(
        item="stalled_by_node",
        means=(
            "A phase stalled (a rank's collective timed out, or lost its peer) and the evidence names "
            "the node that stalled it: its ranks fell behind, its connections lost traffic, or its "
            "InfiniBand link counted errors. The rank that reported the timeout only waited; a training "
            "job would hang on the named node the same way."
        ),
        measured=(
            "From each node's heartbeats during the phase: each rank's completed collectives, and the "
            "node's TCP retransmissions per peer and fabric error counters at the phase's start and "
            "last beat. Between nodes, retransmissions are read first, then link errors, then "
            "progress; inside a node, progress first. `attribution.by` says which named the node."
        ),
        threshold=(
            "A collective waits {allreduce.collective_timeout_s} seconds for its peers. Fixed rules "
            "name the node: at least 5 TCP retransmissions in the phase with 80% on its connections, or each "
            "of its connections losing 5 times as much per MiB as any other pair; InfiniBand error "
            "counters that grew on it alone; or its ranks silent 5 seconds before the first failure, "
            "not done while others were, or under half the others' collectives."
        ),
        first=(
            "Follow `attribution.by`. `retransmits` or `link_errors`: its NIC, cable and switch port "
            "(`ibstat`, `perfquery -x`, `ethtool -S IFACE`, `nstat -az TcpRetransSegs`). `progress`: its "
            "GPUs and ranks (`nvidia-smi`, `dmesg -T | grep -i xid`). Drain it and run again without it "
            "to confirm the others pass."
        ),
        healthy="Every phase completes: no collective times out, and no node's counters grow during it.",
    ),
    Explanation(
        item="stall_unattributed",
        means=(
            "A phase stalled (a rank's collective timed out, or lost its peer) and no node's heartbeats "
            "or counters tell which one stalled it, so no node is named: the rank that reported the "
            "timeout only waited, and draining its node would keep the bad one. A training job on "
            "these nodes could hang the same way."
        ),
        measured=(
            "As for `stalled_by_node`: each rank's progress in the phase and each node's TCP "
            "retransmissions and InfiniBand error counters, from the heartbeats. None of the rules "
            "singles out one node (too few retransmissions, spread over several nodes, or every rank "
            "equally far)."
        ),
        threshold="A collective waits {allreduce.collective_timeout_s} seconds for its peers.",
        first=(
            "Run again: a node that stalls a phase again may leave evidence that names it. If it "
            "repeats unnamed, run on halves of the nodes (`--nodes`) to narrow it, and look at the "
            "fabric between them (switch ports, the ports check). On a fabric known to be slow for "
            "large messages, raise `[allreduce] collective_timeout_s`."
        ),
        healthy="Every phase completes with no collective timing out.",
    ),
    Explanation(
        item="no_results",
        means=(
            "The job ended without a node named as failed and without an error for this phase, yet "
            "rank 0 printed no results for it: what the phase measured is unknown, and no node can be "
            "blamed from what came back."
        ),
        measured=(
            "Rank 0 prints one document (a `PREFLIGHT-JOB-RESULT` line on its stdout) with each phase's "
            "results and errors. Here it printed none, or one without this phase and no error for it; "
            "each node's exit status is in `details.exit_status`."
        ),
        threshold="",
        first=(
            "Look at `details.exit_status` for a node that exited non-zero or reported no status, and "
            "at the other job checks' findings of the same run, which may name what ended the job. Run "
            "again to see whether it repeats."
        ),
        healthy="Rank 0's document holds this phase's results, and every node exits 0.",
    ),
    Explanation(
        item="phase_skipped",
        means=(
            "The phase ran but had nothing to measure on these nodes, for the reason the finding "
            "gives: one process a node (no path inside a node), one node (no rail between nodes), or "
            "one rail a node (the pair tests already measure it). It says nothing against the nodes."
        ),
        measured=(
            "Each rank of the phase looks at the job's layout (ranks a node, nodes, and for the rail "
            "tests each node's GPUs or named interfaces) and skips with its reason where the layout "
            "gives it nothing to test."
        ),
        threshold="",
        first=(
            "Nothing, if the layout is what you meant. To measure it: run more than one rank a node "
            "(the hosts file's `slots=`), more than one node, or on CPU nodes name two or more "
            "interfaces in `[rails] interfaces`."
        ),
        healthy="With more than one rank a node and more than one rail, the phase measures each of them.",
    ),
    Explanation(
        item="phase_not_run",
        means=(
            "The job ran without this check's phase, so the check measured nothing. A run sends every "
            "selected job check's phase with the job; this shows when a job outcome recorded without "
            "the phase is judged. It says nothing about the nodes."
        ),
        measured="The phases the job ran, as its outcome lists them, against the phase this check judges.",
        threshold="",
        first="Run the check itself (`--only CHECK`) so that the job runs its phase.",
        healthy="Every selected job check's phase is run by the job, and each reports its own result.",
    ),
)
