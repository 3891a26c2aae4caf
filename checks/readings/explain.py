"""What each item of ``readings``' findings means (``preflight explain``). The check has no settings
of its own: its thresholds are constants of :mod:`checks.readings.compare` and the floors its fields
declare (:mod:`checks.readings.fields`), quoted here from the code."""

from __future__ import annotations

from checks.hardware.pcie_errors import CORRECTABLE_FLOOR, CORRECTABLE_RATIO
from checks.readings.compare import LEAVE_ONE_OUT_BELOW, MAD_TO_SIGMA, SPREAD_SIGMAS
from checks.readings.parts import KINDS
from preflight.explain import Explanation


def _floors() -> str:
    """The spread fields' floors, as the fields declare them: ``idle temperature 20 C, ...``."""
    found = {
        f"{field.words} {field.floor:g} {field.unit}": None
        for kind in KINDS
        for field in kind.fields
        if field.nature == "spread"
    }
    return ", ".join(found)


def _warned_counters() -> str:
    """The counters whose finding is a warning rather than a note, in words."""
    found = {
        field.words: None
        for kind in KINDS
        for field in kind.fields
        if field.nature == "counter" and field.status == "warn"
    }
    return " and ".join(found) or "none"


EXPLAINS = (
    Explanation(
        item="odd_setting",
        means=(
            "A part (a GPU, an InfiniBand/RoCE port, a network card or the node itself) has a setting, "
            "mode, model or version that its like parts on the other nodes do not share: a BIOS or "
            "firmware update missed, a limit changed by hand, a card in a narrower slot. Ranks of one "
            "job expect identical nodes, and the odd one is where a slowdown or a hang that the "
            "others do not show starts. A warning."
        ),
        measured=(
            "The facts probe's record of every part (NVML or nvidia-smi for GPUs, /sys/class/infiniband "
            "for ports, /sys/class/net for cards, /sys/class/dmi/id, cpufreq, sysctl, ulimits and the "
            "kernel modules for the node) is flattened into fields, and each field declared a setting "
            "(docs/readings.md) is compared between like parts on every node: GPUs of one model, ports "
            "of one link layer, chip and board, interfaces of one name with a PCIe link, nodes of one "
            "CPU and GPU model. Fields that stand out on exactly the same parts are one finding."
        ),
        threshold=(
            "Any difference from the majority: a value held by more than half of the like parts is "
            "the majority and the others are named with both values. Where no value has more than "
            "half, every side is named. A field no one has declared is compared as a setting too, "
            "and listed under `undeclared` in the check's details."
        ),
        first=(
            "Read the field, the part's value and its like parts' value in the finding, and read the "
            "same on the node and on a peer to confirm: `dmidecode -s bios-version`, `cat "
            "/sys/class/infiniband/DEV/fw_ver`, `ethtool -i IFACE`, `sysctl KEY`, `cpupower "
            "frequency-info`, `nvidia-smi -q -i N`. Bring the odd node in line (flash the firmware, "
            "set the governor or sysctl as the image does) or drain it until it is. Where no majority "
            "decides, choose the value the cluster should run and set it on every node."
        ),
        healthy=(
            "Every declared setting the same on all like parts; the pass counts the readings compared "
            "and says none stands out."
        ),
    ),
    Explanation(
        item="odd_reading",
        means=(
            "A GPU reads far hotter, or draws far more power, at idle than the GPUs of its model on the "
            "other nodes: failing cooling (a fan, a heat sink, blocked airflow), or a context left "
            "behind or clocks held up on a GPU that should be idle. Under the job's load such a GPU "
            "is the first to throttle, and every step waits for it. A warning."
        ),
        measured=(
            "Idle temperature, idle memory temperature and idle power draw as NVML (or nvidia-smi) "
            "reports them in the facts, compared between GPUs of one model on every node; a GPU with "
            "a process on it is not at idle and is left out. Each GPU is held to the median of its "
            "like GPUs and a robust spread of theirs (1.4826 times their median absolute deviation), "
            "and only its fault side counts (hotter, more power)."
        ),
        threshold=(
            f"Further above the median than {SPREAD_SIGMAS:g} robust standard deviations "
            f"({MAD_TO_SIGMA:g} times the median absolute deviation) and never less than the field's "
            f"floor: {_floors()} (fixed in code, no setting). Below {LEAVE_ONE_OUT_BELOW} like parts "
            "a GPU is held to the others' median and spread alone, so two nodes are judged as surely "
            "as many."
        ),
        first=(
            "On the node, with nothing running, read the GPU again beside a peer: `nvidia-smi -q -d "
            "TEMPERATURE,POWER,PERFORMANCE -i N` and `nvidia-smi --query-compute-apps=pid,name "
            "--format=csv`. Hot with nothing running: check the chassis fans and airflow and drain the "
            "node until it is fixed. High power with nothing running: look for a context or a held "
            "clock (a process in another container, application clocks set by hand)."
        ),
        healthy=(
            "Idle GPUs of one model within about 15 C of each other (31-44 C on a rack of H100s) and "
            "drawing 60-130 W at idle on H100s; no reading stands out."
        ),
    ),
    Explanation(
        item="odd_counter",
        means=(
            "A part counted far more errors or events since boot than its like parts: a GPU's "
            "corrected ECC errors or rows remapped for them, a network card's receive or transmit "
            "errors, drops, CRC errors or link state changes. A part that has had trouble is likely "
            "to have it again during the job, as retransmits, a slow rank or a lost link. A note, or "
            f"a warning for {_warned_counters()}."
        ),
        measured=(
            "Counters since boot, since the driver loaded or over a GPU's life, read by the facts "
            "probe: NVML's ECC and row-remap counts for GPUs, /sys/class/net/IFACE/statistics and "
            "carrier_changes for network cards. Each count is compared with the median count of its "
            "like parts on every node (GPUs of one model, interfaces of one name)."
        ),
        threshold=(
            f"At least {CORRECTABLE_FLOOR} and at least {CORRECTABLE_RATIO:g} times the like parts' "
            f"median (a median below 1 counts as 1); both fixed in code, no setting. Below "
            f"{LEAVE_ONE_OUT_BELOW} like parts a part is held to the others' median alone."
        ),
        first=(
            "Read the counter again on the node (`ethtool -S IFACE`, `cat "
            "/sys/class/net/IFACE/carrier_changes`, `nvidia-smi -q -d ECC,ROW_REMAPPER -i N`) and "
            "after the job: a count that grows is a live fault. CRC errors and link state changes "
            "point at the cable, transceiver or switch port: reseat or replace it. Growing ECC "
            "corrections point at the GPU's memory: drain the node and have the GPU looked at."
        ),
        healthy=(
            "Counts near their like parts' median (mostly zero for errors); a count that is high but "
            "stays still between runs is old history, not a fault."
        ),
    ),
)
