"""What each item of ``storage``' findings means (``preflight explain``)."""

from __future__ import annotations

from checks.storage.judge import MTIME_SLACK_S
from checks.storage.node import HEAD_TAIL_BYTES, MARKER_BYTES
from checks.storage.probe import _CLEAN_S, _LOOK_S, _READY_S
from preflight.explain import Explanation

# How a data path's copies are compared, for the items that judge them.
_MANIFEST = (
    "Each node's script looks at every `--data` path; the nodes that see one filesystem (told by a "
    "marker file one writes and another sees, or by a network filesystem's source and id) have it "
    "walked once, in sorted order, up to `[storage] max_files` files and `[storage] walk_timeout_s` "
    "seconds. The manifest holds the file count, total bytes, a digest of every path and size, the "
    "newest file and its time, and a digest of the first and last "
    f"{HEAD_TAIL_BYTES // 1024} KiB of `[storage] sample_files` files chosen by their path."
)
# How the checkpoint directory is looked at, for the items that judge it.
_CHECKPOINT = (
    "Each node's script checks that the `--checkpoint-dir` path is a directory, writes a "
    f"{MARKER_BYTES // 1024} KiB marker file there (created exclusively, fsync'd) as the write "
    "test, and reads the free space and free inodes its user may use (`statvfs`); the nodes that "
    "see each other's markers share it."
)

EXPLAINS = (
    Explanation(
        item="missing",
        means=(
            "A data path or the checkpoint directory does not exist on a node (or on any node): a "
            "shared filesystem not mounted there, a copy never made, a typo in the path. The job's "
            "ranks on that node fail as soon as they open the data or save a checkpoint."
        ),
        measured=(
            "Each node's script `stat`s every `--data` path and the `--checkpoint-dir` path as the "
            "node sees it; the reason given is the error it got (No such file or directory, "
            "Permission denied, a stale mount)."
        ),
        threshold="",
        first=(
            "On the node, run `ls -ld PATH` and `findmnt -T PATH`: mount the shared filesystem "
            "there as on the other nodes (check /etc/fstab or the automounter), or copy the data "
            "(`rsync -a` keeps times, so the copies compare alike). Missing everywhere: check the "
            "path given to `--data` or `--checkpoint-dir`."
        ),
        healthy="The path exists on every node, on one shared filesystem or as a copy each.",
    ),
    Explanation(
        item="differs",
        means=(
            "A node's copy of a data set is not the copy most nodes have: files missing or extra, "
            "other sizes, other content. Ranks would train on different data, or fail on a file "
            "only some nodes have, and the run's results would not be what was meant. Where no copy "
            "is on most nodes, every node with a copy is named."
        ),
        measured=(
            _MANIFEST + " Copies whose manifests differ are named against the copy more than half of "
            "the nodes see, with what differs first: file count, size, the newest file's time, the "
            "sampled content, names."
        ),
        threshold="",
        first=(
            "Compare the copy with a good node's (`du -sb PATH`, `find PATH -type f | wc -l`, the "
            "files named in the finding) and bring it up to date from the good one (`rsync -a "
            "--delete GOOD:PATH/ PATH/`), or read the data from one shared filesystem on every node."
        ),
        healthy=(
            "Every node sees the same manifest: the pass gives the layout, the file count, the size "
            "and the newest file."
        ),
    ),
    Explanation(
        item="mtime",
        means=(
            "Copies of a data set hold the same files and the same sampled content, but their "
            "newest files' times differ: copied without keeping times. The data is alike now, but a "
            "stale copy could no longer be told by its times. A warning."
        ),
        measured=(
            _MANIFEST + " The newest modification time of copies whose manifests are otherwise alike "
            "is compared; the copies whose time is not the majority's are named."
        ),
        threshold=(
            f"Newest files more than {MTIME_SLACK_S:g} seconds apart (fixed in code: filesystems "
            "keep times at different grains)."
        ),
        first=(
            "Copy again keeping times (`rsync -a`, `cp -p`), or set the times from the reference "
            "copy (`rsync -a --existing GOOD:PATH/ PATH/`)."
        ),
        healthy="Alike copies with their newest file at the same time on every node.",
    ),
    Explanation(
        item="incomplete",
        means=(
            "A node could not walk its copy of a data set in the time allowed, so the copy was not "
            "compared and could differ unseen: a very large tree, or a slow or overloaded "
            "filesystem that will also slow the job's data loading. A warning."
        ),
        measured=(
            _MANIFEST + " A walk that runs out of time stops, and its copy is left out of the comparison."
        ),
        threshold=(
            "The walk of one copy stops after {walk_timeout_s} seconds; a walk that reaches "
            "{max_files} files stops there instead and is compared on those files."
        ),
        first=(
            "Time a listing on the node (`time find PATH -type f | wc -l`) and compare with a peer: "
            "much slower there points at its mount or its network to the storage. A tree that is "
            "simply large: raise `walk_timeout_s` or lower `max_files` in `[storage]`."
        ),
        healthy="Every copy walked in time; the pass names the file count and size compared.",
    ),
    Explanation(
        item="not_shared",
        means=(
            "Some nodes share one filesystem at the checkpoint path, but these nodes each have a "
            "directory of their own there: a checkpoint they save is not seen by the others, and a "
            "job resumed on other nodes does not find it. A warning."
        ),
        measured=(
            _CHECKPOINT + " Where markers cannot tell, a network filesystem mounted with the same "
            "source and id counts as shared. A node alone while others share is named; a separate "
            "directory on every node is a layout of its own, not this finding."
        ),
        threshold="",
        first=(
            "On the node, run `findmnt -T PATH` beside a peer: mount the same shared filesystem at "
            "the checkpoint path (a missed automount often leaves the bare local directory)."
        ),
        healthy=(
            "One shared filesystem at the checkpoint path on every node, each node seeing the others' "
            "markers."
        ),
    ),
    Explanation(
        item="not_writable",
        means=(
            "The job's user cannot write to the checkpoint directory on a node: a read-only mount, "
            "the wrong owner or mode, a full or failing filesystem, or a path that is not a "
            "directory. The job fails, or loses its work, at its first checkpoint."
        ),
        measured=(
            _CHECKPOINT + " A marker that cannot be created or written is not writable; the reason "
            "is the error the write got."
        ),
        threshold="",
        first=(
            "On the node, as the job's user, try `touch PATH/x && rm PATH/x`, and read `ls -ld PATH` "
            "and `findmnt -T PATH` (ro in the options?): fix the owner or mode, or remount read-write."
        ),
        healthy="The marker written and removed on every node; the pass says writable on all nodes.",
    ),
    Explanation(
        item="space",
        means=(
            "The checkpoint directory on a node has less free space than one checkpoint needs: the "
            "job would fail, or leave a torn checkpoint, when it saves."
        ),
        measured=(
            _CHECKPOINT + " Free space is the bytes available to an unprivileged user (`f_bavail`), "
            "as `df` shows them."
        ),
        threshold=(
            "Free space below {checkpoint_free}, or where that is empty {checkpoint_size} (the "
            "whole checkpoint on a shared filesystem, one node's part on separate ones). Neither "
            "set: free space is reported, not judged."
        ),
        first=(
            "Run `df -h PATH` on the node: remove old checkpoints there, or point `--checkpoint-dir` "
            "at a larger filesystem. Check that `--checkpoint-size` is what one save really writes."
        ),
        healthy="Free space above one checkpoint on every node; the pass gives the least free and the need.",
    ),
    Explanation(
        item="inodes",
        means=(
            "The checkpoint directory's filesystem on a node has fewer free inodes than one "
            "checkpoint writes files (a sharded checkpoint writes one per rank): the save fails "
            "with no space left though `df -h` shows room."
        ),
        measured=_CHECKPOINT + " Free inodes are `f_favail`, as `df -i` shows them.",
        threshold="Fewer free inodes than {checkpoint_files}, the files one checkpoint writes.",
        first=(
            "Run `df -i PATH` on the node and find what holds the inodes (many small files left by "
            "earlier jobs, caches): remove them, or use a filesystem with more inodes."
        ),
        healthy="Free inodes far above the files a checkpoint writes on every node.",
    ),
    Explanation(
        item="left_behind",
        means=(
            "A node could not remove the small marker file the check wrote in a data path or the "
            "checkpoint directory, so a `.preflight-*` file is left there. It holds nothing, but a "
            "data loader that lists the directory sees an extra file, and the same fault (a "
            "filesystem that stopped taking changes) may meet the job."
        ),
        measured=(
            "At the end of the probe (or when it is stopped) each node's script removes every "
            "marker it wrote; what it could not remove is listed with the error."
        ),
        threshold="",
        first=(
            "Remove the file named in the finding by hand (`rm PATH/.preflight-...`, that file "
            "only), and see why the script could not: a filesystem gone read-only or failing "
            "during the run is worth a look (`dmesg`, `findmnt -T PATH`)."
        ),
        healthy="No `.preflight-*` files left in any path after the run.",
    ),
    Explanation(
        item="no_answer",
        means=(
            "A node did not answer the storage probe, so its data paths and checkpoint directory "
            "were not looked at: a mount that hangs on `stat` or a walk is the usual cause, and the "
            "job would hang there too. An error, not a verdict on its storage."
        ),
        measured=(
            "The controller talks to each node's script in phases (look at the paths and write a "
            "marker, look for the others' markers, walk the data, clean up), each finished on every "
            "node before the next; the reason is the first phase that failed or gave no answer."
        ),
        threshold=(
            f"Each phase has a fixed time to answer ({_READY_S:g} seconds to start and look at the "
            f"paths, {_LOOK_S:g} to look for markers, {_CLEAN_S:g} to clean up); the walk has 1.5 "
            "times {walk_timeout_s} plus 10 seconds."
        ),
        first=(
            "Read the reason; on the node, run `timeout 10 stat PATH` and `timeout 10 ls PATH` for "
            "each path: one that hangs is a stuck mount (`findmnt -T PATH`, the NFS or Lustre "
            "client's state in `dmesg`). Drain the node until its mount answers."
        ),
        healthy="Every node answers each phase within seconds; none is listed as not answering.",
    ),
)
