"""How the ``intranode`` check shows itself: its heading, and what to do about a node slow inside
itself, a slow host-device copy, or a network finding that refers to one.
"""

from __future__ import annotations

from checks.compute import root_cause
from preflight.view import Presentation, advice_by_item

PRESENTATION = Presentation(
    heading="Inside each node",
    about="the all-reduce among each node's own GPUs or processes, and host-device copies per GPU",
    advice=advice_by_item(
        {
            "slow_inside_node": "Look inside the node: nvidia-smi topo -m and nvidia-smi nvlink -s (inactive "
            "NVLinks), the fabric manager on NVSwitch systems, the GPUs' PCIe links; on CPU processes, "
            "the loopback.",
            "slow_copy": "Check the GPU's PCIe link (nvidia-smi -q -d PCIE) and its NUMA placement.",
            root_cause.ITEM: root_cause.ADVICE,
        }
    ),
)
