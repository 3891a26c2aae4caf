"""What each cause of ``connect``'s findings means, and its ``shell_output`` note
(``preflight explain``)."""

from __future__ import annotations

from preflight.explain import Explanation

EXPLAINS = (
    Explanation(
        item="unreachable",
        means=(
            "The controller could not open an SSH connection to the node, or lost the one it had: its "
            "name did not resolve, nothing accepted the connection on its SSH port, there was no route "
            "to it, or the connection broke while the probe ran. None of the other checks could look "
            "at the node, and a job given it would fail to start its ranks there."
        ),
        measured=(
            "The controller opens a TCP connection to the node's SSH port (the address and port of "
            "the hosts file or ssh_config, through a ProxyJump host where one is set) and runs the SSH "
            "handshake. A refused or reset connection is tried again; a name that does not resolve, no "
            "route to the host and any other error that is not silence end it at once. A connection "
            "that breaks after it was set up, while the facts probe runs, is named here too."
        ),
        threshold=(
            "A refused or reset connection is tried up to 3 times (fixed), all tries within "
            "{run.connect_timeout_s} seconds; other errors are not tried again."
        ),
        first=(
            "Read the message: `cannot resolve` is DNS or the hosts file, `connection refused` is no "
            "sshd on that port, `no route` is the network. From the controller, `ssh -v USER@NODE true` "
            "and `nc -vz NODE 22` show the same. If the node is down, look at its console through the "
            "BMC and power-cycle it, or leave it out of the job's host list."
        ),
        healthy=(
            "The node accepts the connection at once; the connect pass counts it among the hosts "
            "reached and probed."
        ),
    ),
    Explanation(
        item="timeout",
        means=(
            "The node did not answer in time: it accepted no connection, went silent during the SSH "
            "handshake or authentication, stopped answering during the facts probe, or the probe or "
            "the whole run ran out of time before it finished. A node that hangs like this (a stuck "
            "kernel or GPU driver, a cut or saturated link) would stall the job's rendezvous or its "
            "first collective."
        ),
        measured=(
            "Connecting is timed with every try together, and on a direct connection the controller "
            "also watches for silence: nothing received from the node. During the facts probe the node "
            "sends a heartbeat every second; a node that sends nothing and leaves an SSH keepalive "
            "unanswered while other nodes answer is named silent. Time the controller itself was "
            "stalled (its CPU, its own load) is not counted against the node. The message names the "
            "phase."
        ),
        threshold=(
            "Connecting: {run.connect_timeout_s} seconds for all tries, or {run.silence_s} seconds with "
            "nothing heard. The facts probe: {run.silence_s} seconds quiet with a keepalive unanswered, "
            "or {run.probe_timeout_s} seconds in all. The whole run: {run.timeout_s} seconds, with "
            "{run.fanout} hosts worked on at once."
        ),
        first=(
            "Read the phase in the message. Silent while connecting or during the probe: look at the "
            "node's console through its BMC and at `dmesg` for hung tasks or Xid errors, and "
            "power-cycle it if it does not answer. No SSH banner: sshd is stuck or overloaded "
            "(`systemctl status sshd` from the console). The probe or the run's deadline ran out: the "
            "node answers but slowly (`uptime`, an `nvidia-smi` that hangs); find why before raising "
            "`--timeout`."
        ),
        healthy=(
            "The node connects within a second or two and its probe ends in a few seconds; the connect "
            "pass records each host's probe time (`probe_s`)."
        ),
    ),
    Explanation(
        item="auth_refused",
        means=(
            "The node answered but refused the login: none of the keys offered was accepted for the "
            "user. The node could not be checked, and a launcher that reaches the nodes over SSH as "
            "the same user would be refused there too."
        ),
        measured=(
            "The controller authenticates as the host's user (from the hosts file or ssh_config, else "
            "the local user) with the keys given by `--identity` or ssh_config's IdentityFile, else "
            "the SSH agent's and the default keys in ~/.ssh. The server rejecting every one is this "
            "error; an authentication that got no answer at all is a timeout instead."
        ),
        threshold="",
        first=(
            "Run `ssh -v -i KEY USER@NODE true` from the controller to see which keys are offered and "
            "refused. On the node, check that the public key is in the user's "
            "~/.ssh/authorized_keys, that ~/.ssh and that file are not writable by others, and that "
            "the home directory is mounted. Where a Slurm cluster admits users only to nodes of their "
            "own job (pam_slurm_adopt), run inside an allocation with `--slurm`."
        ),
        healthy="A key is accepted at once and the node is among the hosts reached.",
    ),
    Explanation(
        item="host_key_unknown",
        means=(
            "The node's SSH host key is in none of the known_hosts files the run reads, so the "
            "controller refused to connect: it cannot tell the node from an impostor. A new or "
            "reinstalled node is the usual reason, but its identity should be confirmed before the job "
            "sends it code and data."
        ),
        measured=(
            "The key the node presents in the SSH handshake is looked up under the name it was reached "
            "by (`[NODE]:PORT` on a port other than 22) in ~/.ssh/known_hosts, /etc/ssh/ssh_known_hosts "
            "and any `--known-hosts` file. With no key known for that name, the connection is refused "
            "unless `--accept-new-host-keys` was given; the message carries the key's fingerprint."
        ),
        threshold="",
        first=(
            "Compare the fingerprint in the message with the node's own, read from its console "
            "(`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`) or given by its admins; then add it "
            "to known_hosts, or rerun with `--accept-new-host-keys` on a network you trust. A "
            "cluster-wide /etc/ssh/ssh_known_hosts spares every user this."
        ),
        healthy=(
            "The node's key is already known; with `--accept-new-host-keys` a new key is taken and the "
            "connect pass lists it among the accepted host keys."
        ),
    ),
    Explanation(
        item="host_key_changed",
        means=(
            "The node presented a host key other than the one known_hosts holds for it, and the "
            "controller refused to connect. Either the node was reinstalled or its keys regenerated, "
            "or something between the controller and the node answers in its place; until that is "
            "known, the job should send nothing to it."
        ),
        measured=(
            "The key the node presents in the SSH handshake is compared with the key known_hosts holds "
            "for its name; the message gives both fingerprints. `--accept-new-host-keys` does not "
            "change this: a changed key is always refused."
        ),
        threshold="",
        first=(
            "Ask the node's admins whether it was reinstalled, and compare the new fingerprint with the "
            "one its console shows (`ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub`). Only then "
            "remove the stale entry (`ssh-keygen -R NODE`) and add the new key; keep the node out of "
            "the job until the change is explained."
        ),
        healthy="The presented key matches the one in known_hosts and nothing is said.",
    ),
    Explanation(
        item="python_missing",
        means=(
            "The Python interpreter the run uses is not on the node, or cannot be executed there, so "
            "the facts probe could not run. The training environment is often missing on the node "
            "too (a shared filesystem not mounted, an environment not installed), and the job's ranks "
            "would fail to start there."
        ),
        measured=(
            "The probe is sent over SSH on standard input to the interpreter, run under `sh -c` and "
            "`timeout` in the node's login shell, so a bare name is looked up on the PATH of a "
            "non-interactive SSH command. An exit status of 127 (not found) or 126 (not executable) "
            "is this error; the message quotes the last line the node printed on stderr."
        ),
        threshold=(
            "The interpreter is {run.python} (`--python` sets it for one run); an exit status of 127 "
            "or 126 (fixed) from it is this error."
        ),
        first=(
            "Run `ssh NODE 'command -v python3; echo $PATH'` (with the interpreter you gave) to see "
            "what a non-interactive SSH command finds: it lacks what an interactive login adds to "
            "PATH. Point `--python` (or `[run] python`) at the training environment's interpreter by "
            "absolute path, or install or mount that environment on the node."
        ),
        healthy=(
            "The interpreter runs on every node and the probe returns its facts; the versions check "
            "then compares the nodes' Python versions."
        ),
    ),
    Explanation(
        item="probe_failed",
        means=(
            "The node was reached and its Python started, but the facts probe did not hand back its "
            "facts: it exited with an error, printed something other than its JSON document, or the "
            "controller itself failed while handling the host. The node could not be checked, and "
            "what broke the probe (a broken or too old Python, a shell that floods standard output) "
            "may break the job there too."
        ),
        measured=(
            "The probe (Python 3.8 or newer) writes a frame line on standard output, then one JSON "
            "document of facts. A non-zero exit status (other than 126 and 127), no frame, no JSON "
            "after it, a document that is not an object, or too much output to be one document is this "
            "error, with the probe's last lines of stderr. An error inside the controller while it "
            "handled the host is named here too, as an internal error."
        ),
        threshold="",
        first=(
            "Read the stderr lines in the message, then check that node alone (`preflight check "
            "--nodes NODE --debug`). On the node, check the interpreter (`PYTHON -c 'import sys; "
            "print(sys.version)'`) and that /tmp is writable and not full. An internal error is "
            "preflight's own bug: report it with the message."
        ),
        healthy=(
            "The probe ends with status 0 and one JSON document, and the node is among the hosts reached."
        ),
    ),
    Explanation(
        item="interrupted",
        means=(
            "The run was stopped (Ctrl-C, or a SIGTERM such as a CI runner's cancel) while the hosts "
            "were still being connected and probed, so this host has no result. It says nothing "
            "about the node itself."
        ),
        measured=(
            "An interrupt before every host's facts were in names each host of the run that has no "
            "result of its own with this cause, and the report is still written; an interrupt later, "
            "during the checks, does not."
        ),
        threshold="",
        first=(
            "Nothing to fix on the node: rerun preflight and let it finish. Do not act on the hand-back "
            "of an interrupted run, which lists these hosts as unchecked. If a CI step's time limit "
            "cancelled it, give the step more time than preflight's own deadline (`--timeout`)."
        ),
        healthy="A run that ends by itself, with every host reached or named with a cause of its own.",
    ),
    Explanation(
        item="shell_output",
        means=(
            "The node's login shell prints text on standard output whenever a command is run over SSH "
            "(a banner, a message of the day, an `echo` in ~/.bashrc). The node was checked all the "
            "same, since the probe's own output is framed, but the text corrupts what scp, rsync and "
            "any script that reads a remote command's output receive. A note, not a fault."
        ),
        measured=(
            "The probe writes a random frame line on standard output before anything else, then its "
            "JSON document; whatever the node printed before that line or after the document is the "
            "shell's. Its size and first 2,000 characters (masked as facts are) are kept in the "
            "host's facts; the note quotes each host's first non-empty line, cut at 200 characters "
            "(both fixed)."
        ),
        threshold="",
        first=(
            "See what prints with `ssh NODE true | head`. Guard the output in ~/.bashrc, "
            "/etc/bash.bashrc or /etc/profile.d with an interactive-shell test (`[[ $- == *i* ]] || "
            "return` at the top of ~/.bashrc), or send it to stderr."
        ),
        healthy="`ssh NODE true` prints nothing on standard output, and there is no note.",
    ),
)
