"""NVIDIA's NVSwitch SXID errors, each with the class NVIDIA's Fabric Manager User Guide gives it
(DU-09883-001 v1.3, appendix D, "NVSwitch Errors"; the table as leptonai/gpud's
``components/accelerator/nvidia/sxid/sxid.go`` transcribes it): ``non_fatal`` (D.4, "Non-Fatal
NVSwitch SXid Errors"), ``info`` for the non-fatal ones the guide says have no impact (single-bit
ECC errors the NVSwitch corrects, and 22013, which "can be safely ignored"), ``fatal`` (D.5, fatal
to the partitions using the port) and ``always_fatal`` (D.6, fatal to the whole fabric). The
severity an SXID line prints ("Fatal", "Non-fatal", "Correctable") comes before this table:
``kind_of`` is read only for an SXID whose lines print none.
"""

from __future__ import annotations

from typing import Literal

Kind = Literal["always_fatal", "fatal", "non_fatal", "info"]
# What an SXID line says of itself, as the NVSwitch driver prints it.
Severity = Literal["Fatal", "Non-fatal", "Correctable"]

GUIDE_URL = "https://docs.nvidia.com/datacenter/tesla/pdf/fabric-manager-user-guide.pdf"

_SINGLE_BIT_ECC = (
    11012, 11021, 11022, 11023, 12021, 12023, 15008, 15011, 19049, 19055, 19057, 19059, 19062,
    19065, 19068, 19071, 24001, 24002, 24003,
)  # fmt: skip

# SXID: (what the guide calls it, its class).
CATALOGUE: dict[int, tuple[str, Kind]] = {
    # D.4, non-fatal.
    11004: ("ingress invalid ACL, a fabric partition configuration error", "non_fatal"),
    **{code: ("single-bit ECC error, corrected by the NVSwitch", "info") for code in _SINGLE_BIT_ECC},
    12028: ("egress non-posted PRIV error: the GPU's NVLink traffic stalls", "non_fatal"),
    19084: ("AN1 heartbeat timeout", "non_fatal"),
    20001: ("TX replay error: NVLink packets retransmitted", "non_fatal"),
    20012: ("broken or inconsistent NVLink connection", "non_fatal"),
    22013: ("Minion link DLREQ interrupt, which can be safely ignored", "info"),
    # D.5, fatal to the partitions using the port.
    11001: ("ingress invalid command", "fatal"),
    11009: ("ingress invalid VCSet", "fatal"),
    11013: ("ingress header DBE", "fatal"),
    11018: ("ingress RID DBE", "fatal"),
    11019: ("ingress RLAN DBE", "fatal"),
    11020: ("ingress control parity", "fatal"),
    12001: ("egress crossbar overflow", "fatal"),
    12002: ("egress packet route", "fatal"),
    12022: ("egress input ECC DBE error", "fatal"),
    12024: ("egress output ECC DBE error", "fatal"),
    12025: ("egress credit overflow", "fatal"),
    12026: ("egress destination request ID error", "fatal"),
    12027: ("egress destination response ID error", "fatal"),
    12030: ("egress control parity error", "fatal"),
    12031: ("egress credit parity error", "fatal"),
    12032: ("egress flit type mismatch", "fatal"),
    14017: ("TS ATO timeout", "fatal"),
    15001: ("route buffer over/underflow", "fatal"),
    15006: ("route transdone over/underflow", "fatal"),
    15009: ("route GLT DBE", "fatal"),
    15010: ("route parity", "fatal"),
    15012: ("route incoming DBE", "fatal"),
    15013: ("route credit parity", "fatal"),
    19047: ("NCISOC HDR ECC DBE error", "fatal"),
    19048: ("NCISOC DAT ECC DBE error", "fatal"),
    19054: ("HDR RAM ECC DBE error", "fatal"),
    19056: ("DAT0 RAM ECC DBE error", "fatal"),
    19058: ("DAT1 RAM ECC DBE error", "fatal"),
    19060: ("CREQ RAM HDR ECC DBE error", "fatal"),
    19061: ("CREQ RAM DAT ECC DBE error", "fatal"),
    19063: ("response RAM HDR ECC DBE error", "fatal"),
    19064: ("response RAM DAT ECC DBE error", "fatal"),
    19066: ("COM RAM HDR ECC DBE error", "fatal"),
    19067: ("COM RAM DAT ECC DBE error", "fatal"),
    19069: ("RSP1 RAM HDR ECC DBE error", "fatal"),
    19070: ("RSP1 RAM DAT ECC DBE error", "fatal"),
    20034: ("LTSSM fault up: the link went down from active", "fatal"),
    22012: ("Minion link NA interrupt", "fatal"),
    24004: ("sourcetrack TCEN0 crumbstore DBE", "fatal"),
    24005: ("sourcetrack TCEN0 TD crumbstore DBE", "fatal"),
    24006: ("sourcetrack TCEN1 crumbstore DBE", "fatal"),
    24007: ("sourcetrack timeout error", "fatal"),
    # D.6, fatal to the whole fabric.
    12020: ("egress sequence ID error", "always_fatal"),
    22003: ("Minion halt", "always_fatal"),
    22011: ("Minion exterror", "always_fatal"),
    23001: ("ingress SRC-VC buffer overflow", "always_fatal"),
    23002: ("ingress SRC-VC buffer underflow", "always_fatal"),
    23003: ("egress DST-VC credit overflow", "always_fatal"),
    23004: ("egress DST-VC credit underflow", "always_fatal"),
    23005: ("ingress packet burst error", "always_fatal"),
    23006: ("ingress packet sticky error", "always_fatal"),
    23007: ("possible bubbles at ingress", "always_fatal"),
    23008: ("ingress packet invalid dst error", "always_fatal"),
    23009: ("ingress packet parity error", "always_fatal"),
    23010: ("ingress SRC-VC buffer overflow", "always_fatal"),
    23011: ("ingress SRC-VC buffer underflow", "always_fatal"),
    23012: ("egress DST-VC credit overflow", "always_fatal"),
    23013: ("egress DST-VC credit underflow", "always_fatal"),
    23014: ("ingress packet burst error", "always_fatal"),
    23015: ("ingress packet sticky error", "always_fatal"),
    23016: ("possible bubbles at ingress", "always_fatal"),
    23017: ("ingress credit parity error", "always_fatal"),
}

KIND_TEXT: dict[Kind, str] = {
    "always_fatal": "always fatal",
    "fatal": "fatal",
    "non_fatal": "non-fatal",
    "info": "non-fatal, no impact",
}


def kind_of(sxid: int) -> Kind | None:
    """The class NVIDIA's guide gives ``sxid``; None for one preflight's table does not list."""
    entry = CATALOGUE.get(sxid)
    return entry[1] if entry else None


def name_of(sxid: int) -> str | None:
    """What NVIDIA's guide calls ``sxid``; None for one preflight's table does not list."""
    entry = CATALOGUE.get(sxid)
    return entry[0] if entry else None
