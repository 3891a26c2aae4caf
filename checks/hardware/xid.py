"""NVIDIA's XID errors, each with the immediate action NVIDIA's XID catalogue gives for it
(docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, the "Resolution Bucket (Immediate
Action)" column): RESTART_APP is ``application``, IGNORE is ``info``, RESET_GPU is ``reset_gpu``,
RESTART_BM (79, the GPU fell off the bus) is ``reboot``, CHECK_MECHANICALS is ``inspect``. Where the
catalogue sends the reader to a workflow that decodes the line, or gives no action yet, the action
is ``investigate``; the NVLink5 XIDs (144-150) and XID 154 (the GPU's recovery action) are read
from the line itself by ``action_of``. Codes the catalogue lists as unused are left out: a line
with one of them is named as unknown, with where to look.
"""

from __future__ import annotations

import re
from typing import Literal

Action = Literal["reboot", "reset_gpu", "drain", "inspect", "investigate", "application", "info"]

CATALOGUE_URL = "https://docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html"

# XID: (what NVIDIA calls it, the immediate action).
CATALOGUE: dict[int, tuple[str, Action]] = {
    8: ("GPU stopped processing", "application"),
    11: ("invalid or corrupted push buffer stream", "application"),
    13: ("graphics engine exception", "application"),
    14: ("fake error (test)", "info"),
    25: ("invalid or illegal push buffer stream", "application"),
    31: ("GPU memory page fault", "application"),
    32: ("invalid or corrupted push buffer stream", "application"),
    37: ("driver firmware error", "info"),
    38: ("driver firmware error", "info"),
    39: ("copy engine exception", "application"),
    40: ("copy engine exception", "application"),
    41: ("copy engine exception", "application"),
    43: ("GPU stopped processing (the application's context)", "info"),
    44: ("graphics engine fault during context switch", "info"),
    # The catalogue's workflow for 45: it follows another XID or a killed process; alone, it
    # points at the fabric manager.
    45: ("preemptive cleanup, after another error or a killed process", "info"),
    46: ("GPU stopped processing", "reset_gpu"),
    48: ("double-bit ECC error", "reset_gpu"),
    54: ("auxiliary power is not connected to the GPU board", "inspect"),
    60: ("video processor exception", "application"),
    61: ("internal micro-controller breakpoint", "reset_gpu"),
    62: ("internal micro-controller halt", "reset_gpu"),
    63: ("GPU memory remapping event", "info"),
    64: ("GPU memory remapping failure", "reset_gpu"),
    66: ("illegal access by driver", "info"),
    67: ("illegal access by driver", "info"),
    68: ("NVDEC0 exception", "application"),
    69: ("graphics engine class error", "application"),
    70: ("CE3 error", "application"),
    71: ("CE4 error", "application"),
    72: ("CE5 error", "application"),
    74: ("NVLink error", "reset_gpu"),
    75: ("CE6 error", "application"),
    76: ("CE7 error", "application"),
    77: ("CE8 error", "application"),
    78: ("vGPU start error (update the software and firmware)", "investigate"),
    79: ("GPU has fallen off the bus", "reboot"),
    80: ("corrupted data sent to GPU", "application"),
    82: ("NVJPG0 error", "application"),
    83: ("NVDEC1 error", "application"),
    84: ("NVDEC2 error", "application"),
    85: ("CE9 error", "application"),
    86: ("OFA exception", "application"),
    88: ("NVDEC3 error", "application"),
    89: ("NVDEC4 error", "application"),
    92: ("high single-bit ECC error rate", "info"),
    93: ("non-fatal violation of provisioned InfoROM wear limit", "info"),
    94: ("contained memory error", "application"),
    95: ("uncontained memory error", "reset_gpu"),
    96: ("NVDEC5 error", "application"),
    97: ("NVDEC6 error", "application"),
    98: ("NVDEC7 error", "application"),
    99: ("NVJPG1 error", "application"),
    100: ("NVJPG2 error", "application"),
    101: ("NVJPG3 error", "application"),
    102: ("NVJPG4 error", "application"),
    103: ("NVJPG5 error", "application"),
    104: ("NVJPG6 error", "application"),
    105: ("NVJPG7 error", "application"),
    106: ("SMBPBI test message", "info"),
    107: ("SMBPBI test message", "info"),
    109: ("context switch timeout", "reset_gpu"),
    110: ("security fault", "reset_gpu"),
    119: ("GSP RPC timeout", "reset_gpu"),
    120: ("GSP error", "reset_gpu"),
    121: ("C2C error", "info"),
    **{code: (f"CE{code - 116} error", "application") for code in range(126, 136)},
    136: ("NVLink link training failed", "reset_gpu"),
    137: ("NVLink privilege error", "info"),
    139: ("OFA1 error", "application"),
    140: ("unrecovered ECC error", "reset_gpu"),
    141: ("CUDA fast path error", "info"),
    142: ("NVENC3 error", "investigate"),
    143: ("GPU initialisation error", "reset_gpu"),
    144: ("NVLink SAW error", "investigate"),
    145: ("NVLink RLW error", "investigate"),
    146: ("NVLink TLW error", "investigate"),
    147: ("NVLink TREX error", "investigate"),
    148: ("NVLink NVLPW_CTRL error", "investigate"),
    149: ("NVLink NETIR error", "investigate"),
    150: ("NVLink MSE error", "investigate"),
    151: ("key rotation error (restart the VM)", "investigate"),
    152: ("DLA SMMU error", "info"),
    153: ("DLA timeout", "info"),
    154: ("GPU recovery action changed", "investigate"),
    155: ("NVLink software-defined error", "reset_gpu"),
    156: ("resource retirement event", "reset_gpu"),
    157: ("resource retirement failure", "info"),
    158: ("GPU fatal timeout", "reset_gpu"),
    159: ("CHI non-data error (check UVM)", "investigate"),
    160: ("channel retirement event", "info"),
    161: ("channel retirement failure", "info"),
    162: ("power smoothing circuitry re-engaged", "info"),
    163: ("power smoothing circuitry disengaged", "info"),
    # From here the catalogue names the XIDs but gives no immediate action yet.
    164: ("power smoothing circuitry at low lifetime", "investigate"),
    165: ("power smoothing circuitry lifetime exhausted", "investigate"),
    166: ("NVLink traffic before encryption was set up", "investigate"),
    167: ("PCIe fatal timeout", "investigate"),
    168: ("reduced GPU memory capacity", "investigate"),
    169: ("SEC2 micro-controller halt", "investigate"),
    170: ("interrupt seen in confidential computing mode", "investigate"),
    # 171 and 172 follow an XID 48 and say whether DRAM or SRAM failed: the action is 48's.
    171: ("uncorrectable DRAM error", "reset_gpu"),
    172: ("uncorrectable SRAM error", "reset_gpu"),
}

ACTION_TEXT: dict[Action, str] = {
    "reboot": "reboot the node and check the GPU's seating, power and PCIe path",
    "reset_gpu": "drain the node and reset the GPU (nvidia-smi -r) or reboot",
    "drain": "drain the node: stop the GPU's peer-to-peer work, then reset the GPU (nvidia-smi -r)",
    "inspect": "drain the node and check the GPU's power cables and seating",
    "investigate": "look the line up in NVIDIA's XID catalogue; the action depends on what it says",
    "application": "an application fault; restart the job, and look at the GPU if it repeats",
    "info": "recorded for information",
}

# XID 154's recovery actions, as NVML numbers them (nvmlDeviceGpuRecoveryAction_t).
RECOVERY_ACTIONS: dict[int, Action] = {
    0: "info",  # none
    1: "reset_gpu",  # GPU reset
    2: "reboot",  # node reboot
    3: "drain",  # drain peer-to-peer traffic
    4: "drain",  # drain, then reset the GPU
    5: "investigate",  # recover the IMEX domain
    6: "reset_gpu",  # reset the GPU's PCIe bus
    7: "reboot",  # system reboot
}
NVLINK5 = range(144, 151)
_RECOVERY = re.compile(r"recovery action changed from .*? to 0x(?P<code>[0-9a-fA-F]+)")
# NVLink5 lines name the unit and its severity: "149, NETIR_LINK_EVT Fatal XC0 i0 Link 00 (...)".
_NVLINK5_SEVERITY = re.compile(r"^\S+\s+(?P<severity>Fatal|Nonfatal)\b")


def action_of(xid: int, detail: str = "") -> Action | None:
    """The action NVIDIA gives for ``xid`` with the rest of its line ``detail``; None for one the
    catalogue does not list. XID 154 carries its recovery action ("... to 0x2 (Node Reboot
    Required)"); an NVLink5 XID says whether it was fatal, and the catalogue resets the GPU for
    the fatal ones and ignores the others."""
    if xid == 154 and (found := _RECOVERY.search(detail)):
        return RECOVERY_ACTIONS.get(int(found.group("code"), 16), "investigate")
    if xid in NVLINK5 and (severity := _NVLINK5_SEVERITY.match(detail)):
        return "reset_gpu" if severity.group("severity") == "Fatal" else "info"
    entry = CATALOGUE.get(xid)
    return entry[1] if entry else None


def name_of(xid: int) -> str | None:
    """What NVIDIA's catalogue calls ``xid``; None for one it does not list."""
    entry = CATALOGUE.get(xid)
    return entry[0] if entry else None
