"""What each item of ``hardware``'s findings means (``preflight explain``): the GPUs' and their
fabric's (``explain_gpus``), then the node's own, its network cards' and its kernel's
(``explain_host``)."""

from __future__ import annotations

from checks.hardware.explain_gpus import EXPLAINS_GPUS
from checks.hardware.explain_host import EXPLAINS_HOST

EXPLAINS = (*EXPLAINS_GPUS, *EXPLAINS_HOST)
