"""What each item of ``environment``'s findings means (``preflight explain``)."""

from __future__ import annotations

from preflight.explain import Explanation

EXPLAINS = (
    Explanation(
        item="variables",
        means=(
            "Variables that NCCL, torch, CUDA or gloo read are set differently on some nodes than on "
            "the others, as the job would see them. Ranks that disagree on the network, its plugin, "
            "the collective's algorithm or the rendezvous do not connect or hang in the first "
            "collective; other differences (a debug level, a buffer size) make one node behave "
            "unlike its peers."
        ),
        measured=(
            "The facts probe reads the environment of the session each node is reached in (SSH or "
            "srun): names starting NCCL_, CUDA_, GLOO_, TORCH_, PYTORCH_, FI_ or UCX_, and MASTER_ADDR, "
            "MASTER_PORT, WORLD_SIZE, OMP_NUM_THREADS, MKL_NUM_THREADS, LD_LIBRARY_PATH and LD_PRELOAD. "
            "The job's own (`--env`, `--env-file`, `[job_env]`) go over them, then NCCL's files "
            "(NCCL_CONF_FILE or ~/.nccl.conf, then /etc/nccl.conf) fill what is unset. Values are "
            "compared between nodes (unset counts as a value; secrets by a keyed digest; a node's "
            "own name or address in a value is no difference), and the nodes outside the majority "
            "are named."
        ),
        threshold=(
            "A difference in a variable matching {must_match} fails (an NCCL_ one only where the job "
            "uses NCCL); any other difference warns; variables matching {ignore} are not compared."
        ),
        first=(
            "Read the values on each side and where each comes from (session, job, or an nccl.conf). "
            "Set the variable the same way for every node in the job's launcher (`--env`, an env file, "
            "`srun --export`) rather than in each node's shell profile or nccl.conf, and run again "
            "with `--env NAME=VALUE` to check what the job will see."
        ),
        healthy=(
            "Every compared variable the same on every node; the pass lists the variables that agree "
            "and the NCCL network plugin they share."
        ),
    ),
    Explanation(
        item="net_plugin",
        means=(
            "The nodes would not load the same NCCL network plugin (or some would load none): their "
            "ranks would use different network transports, so NCCL cannot connect them, or some "
            "nodes fall back to NCCL's built-in transport and run far slower. A failure where the job uses "
            "NCCL, a warning otherwise."
        ),
        measured=(
            "On each node the facts probe finds the library NCCL would load: NCCL_NET_PLUGIN (as a "
            "file name or as libnccl-net-NAME.so), else libnccl-net.so, looked up in LD_LIBRARY_PATH, "
            "the ldconfig cache and the system library directories. The file names found are "
            'compared between nodes, "none found" being one of them.'
        ),
        threshold="",
        first=(
            "Compare `ldconfig -p | grep nccl-net` and the LD_LIBRARY_PATH of the job on the nodes "
            "named; install the same plugin (libnccl-net*.so) on every node, on the path the job "
            "uses, or set NCCL_NET_PLUGIN the same way everywhere."
        ),
        healthy="One plugin file name on every node (or none on every node); the pass names it.",
    ),
    Explanation(
        item="conf_unread",
        means=(
            "An NCCL configuration file sets a name that NCCL never reads, such as `NCCL_DEBUG = "
            "INFO`: NCCL splits a line at its first '=' and keeps the spaces, so it sets "
            "`NCCL_DEBUG ` and the intended setting silently does not apply on that node."
        ),
        measured=(
            "The facts probe reads the user's file (NCCL_CONF_FILE, else ~/.nccl.conf in the user's "
            "home) and /etc/nccl.conf as NCCL does, and lists the names with spaces in them."
        ),
        threshold="",
        first="Rewrite the named lines as NAME=VALUE, with no spaces around the '=', in the file named.",
        healthy="Every line of the NCCL configuration files written NAME=VALUE, and no warning.",
    ),
    Explanation(
        item="hca_prefix",
        means=(
            "An entry of NCCL_IB_HCA selects (or excludes) more HCAs than the one it names: NCCL "
            "matches entries as prefixes, so `mlx5_1` also selects `mlx5_10` to `mlx5_19`. The job "
            "then uses rails it was not meant to use, or drops rails it meant to keep, and its "
            "traffic crosses the wrong NICs."
        ),
        measured=(
            "NCCL_IB_HCA as the job sees it on each node is parsed as NCCL parses it (a leading '^' "
            "excludes, a leading '=' matches exactly) and each entry is matched against the node's "
            "HCAs in /sys/class/infiniband. An entry that is itself an HCA name, or ends in a number "
            "other HCAs' numbers extend, warns; a family prefix such as `mlx5` is meant to match many "
            "and does not."
        ),
        threshold="",
        first=(
            "Start the list with '=' (or '^=' to exclude) so that each entry matches one HCA by its "
            "whole name: NCCL_IB_HCA==mlx5_1:1,mlx5_2:1."
        ),
        healthy="NCCL_IB_HCA unset, anchored with '=', or naming only entries that match one HCA each.",
    ),
    Explanation(
        item="hca_list_marker",
        means=(
            "NCCL_IB_HCA has a '^' or '=' in front of an entry after the first: NCCL reads these only "
            "at the start of the list, so it takes that entry as part of a name that matches no HCA. "
            "The HCA meant to be excluded or selected is not, and the job's traffic crosses other "
            "NICs than planned."
        ),
        measured=(
            "NCCL_IB_HCA as the job sees it on each node, parsed as NCCL parses it; checked where the "
            "node lists HCAs."
        ),
        threshold="",
        first=(
            "Write '^' and '=' once, at the start of NCCL_IB_HCA: they apply to the whole list "
            "(NCCL_IB_HCA=^=mlx5_8,mlx5_14 excludes both)."
        ),
        healthy="At most one leading '^' and one '=', at the very start of the list.",
    ),
)
