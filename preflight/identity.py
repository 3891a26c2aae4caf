"""A node's identity: what the node is, read on the node, not the name the inventory reached it by.

The rule (docs/node-identity.md), from the facts the node reported:

1. its host name, short and in lower case (``pfnode3`` for ``PFNODE3.cluster.local``), unless the
   name says nothing of the machine (``localhost``, an image's default such as ``ubuntu``);
2. else its machine ID (``/etc/machine-id``, as the digest the probe reports);
3. else its DMI product serial, else its DMI board serial (placeholders such as ``To Be Filled By
   O.E.M.`` are no serial);
4. else the serial of its first GPU by serial;
5. else, and for a node that was not reached, the name that reached it (``inventory``).

The host name comes first because every user can read it, a reboot keeps it, and so does a
reinstall of the same machine; the inventory's names (an address, an ssh_config alias, a Slurm
node name, ``--local``'s own name) are aliases of it. An identity must be unique among a run's
nodes: nodes of one run that come out with the same identity (two machines cloned from one image
that both call themselves ``pfnode``) are each known by the name that reached them, and
:func:`identities` says so (:class:`Clash`). Two nodes sharing a machine ID under distinct host
names is no clash: the host name decides.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

HOSTNAME = "hostname"
MACHINE_ID = "machine-id"
PRODUCT_SERIAL = "dmi product serial"
BOARD_SERIAL = "dmi board serial"
GPU_SERIAL = "gpu serial"
INVENTORY = "inventory"

# Host names an image or an unconfigured machine has: they name no machine.
GENERIC_HOSTNAMES = frozenset(
    {"", "localhost", "localhost.localdomain", "localdomain", "(none)", "ubuntu", "debian", "linux", "node"}
)
# What firmware writes where no serial was set.
PLACEHOLDER_SERIALS = frozenset(
    {
        "",
        "to be filled by o.e.m.",
        "not specified",
        "not applicable",
        "default string",
        "system serial number",
        "base board serial number",
        "serial number",
        "0123456789",
        "none",
        "n/a",
        "na",
        "unknown",
        "empty",
    }
)


@dataclass(frozen=True)
class Identity:
    """A node's identity (``key``), how it was decided (``source``: one of this module's
    constants) and the name that reached the node in this run (``alias``)."""

    key: str
    source: str
    alias: str

    @property
    def differs(self) -> bool:
        """Whether the report should show the identity beside the name that reached the node."""
        return self.key != self.alias


@dataclass(frozen=True)
class Clash:
    """Nodes of one run that came out with one identity: each is known by its own name instead."""

    key: str
    source: str
    names: tuple[str, ...]

    @property
    def summary(self) -> str:
        return (
            f"{', '.join(self.names)} are {len(self.names)} nodes with one {self.source} ({self.key}):"
            " each is kept under the name that reached it (cloned images?)"
        )


def short_hostname(name: str) -> str:
    """A host name's first label, in lower case; an address stays whole."""
    text = name.strip().lower()
    if is_address(text):
        return text
    return text.split(".", 1)[0]


def is_address(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]").split("%", 1)[0])
    except ValueError:
        return False
    return True


def _serial(value: Any) -> str | None:
    text = str(value).strip() if isinstance(value, str | int) else ""
    if text.lower() in PLACEHOLDER_SERIALS or set(text.lower()) <= {"0", "x", " ", "-", "f"}:
        return None
    return text


def identity_of(alias: str, facts: Mapping[str, Any] | None) -> Identity:
    """The identity of the node reached as ``alias`` that reported ``facts`` (None or empty: not
    reached)."""
    facts = facts or {}
    hostname = facts.get("hostname")
    if isinstance(hostname, str) and short_hostname(hostname) not in GENERIC_HOSTNAMES:
        return Identity(short_hostname(hostname), HOSTNAME, alias)
    machine = facts.get("identity")
    machine = machine if isinstance(machine, Mapping) else {}
    machine_id = machine.get("machine_id")
    if isinstance(machine_id, str) and machine_id:
        return Identity(f"machine-{machine_id[:12]}", MACHINE_ID, alias)
    for field, source in (("product_serial", PRODUCT_SERIAL), ("board_serial", BOARD_SERIAL)):
        serial = _serial(machine.get(field))
        if serial:
            return Identity(f"serial-{serial}", source, alias)
    gpus = facts.get("gpus")
    serials = sorted(
        s
        for g in (gpus if isinstance(gpus, list) else [])
        if isinstance(g, Mapping) and (s := _serial(g.get("serial")))
    )
    if serials:
        return Identity(f"gpu-{serials[0]}", GPU_SERIAL, alias)
    return Identity(alias, INVENTORY, alias)


def identities(nodes: Mapping[str, Mapping[str, Any] | None]) -> tuple[dict[str, Identity], list[Clash]]:
    """Each node's identity (by the name that reached it; the facts of a node not reached are None
    or empty), and the clashes: identities shared by several nodes of the run, whose nodes are then
    known by the names that reached them."""
    found = {alias: identity_of(alias, facts) for alias, facts in nodes.items()}
    by_key: dict[str, list[str]] = {}
    for alias, identity in found.items():
        by_key.setdefault(identity.key, []).append(alias)
    clashes = []
    for key, aliases in sorted(by_key.items()):
        if len(aliases) < 2:
            continue
        sources = {found[a].source for a in aliases}
        if sources == {INVENTORY}:
            continue  # one name twice in the inventory: the same node
        clashes.append(Clash(key, sorted(sources - {INVENTORY})[0], tuple(sorted(aliases))))
        for alias in aliases:
            found[alias] = Identity(alias, INVENTORY, alias)
    return found, clashes
