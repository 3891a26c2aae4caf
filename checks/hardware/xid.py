"""NVIDIA's XID errors, classified by the action NVIDIA's XID catalogue gives for them
(docs.nvidia.com/deploy/xid-errors): most say the GPU must be reset, a few that the node must be
rebooted and checked (79: the GPU fell off the bus), some that the application was at fault."""

from __future__ import annotations

from typing import Literal

Action = Literal["reboot", "reset_gpu", "application", "info"]

ACTIONS: dict[int, Action] = {
    13: "application",  # graphics engine exception
    31: "application",  # GPU memory page fault
    43: "application",  # GPU stopped processing (the application's context)
    45: "info",  # preemptive cleanup, after another error or a killed process
    48: "reset_gpu",  # double-bit ECC error
    61: "reset_gpu",  # internal micro-controller breakpoint
    62: "reset_gpu",  # internal micro-controller halt
    63: "info",  # ECC page retirement or row remapping recorded
    64: "reset_gpu",  # ECC page retirement or row remapping failure
    68: "application",  # video decoder exception
    74: "reset_gpu",  # NVLink error
    79: "reboot",  # GPU has fallen off the bus
    92: "info",  # high single-bit ECC error rate
    94: "application",  # contained ECC error: the affected application must restart
    95: "reset_gpu",  # uncontained ECC error
    109: "application",  # context switch timeout
    119: "reset_gpu",  # GSP RPC timeout
    120: "reset_gpu",  # GSP error
    121: "reset_gpu",  # C2C link error
    140: "reset_gpu",  # unrecovered ECC error
    143: "reset_gpu",  # GPU initialisation failure
}
ACTION_TEXT: dict[Action, str] = {
    "reboot": "reboot the node and check the GPU's seating, power and PCIe path",
    "reset_gpu": "drain the node and reset the GPU (nvidia-smi -r) or reboot",
    "application": "an application fault; restart the job, and look at the GPU if it repeats",
    "info": "recorded for information",
}


def action_of(xid: int) -> Action | None:
    """The action NVIDIA gives for ``xid``; None for one this table does not know."""
    return ACTIONS.get(xid)
