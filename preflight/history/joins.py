"""Joining the names a store of schema 3 or older kept one node under.

Before version 4 the store kept a node under the name that reached it: ``10.77.0.13`` in a full
run, ``pfnode3`` in that node's own prolog. The migration to version 4 joins such names where the
parts kept show them to be one machine, and leaves the others as they are:

* two names are one node when no run reached both, and a part set of one and a part set of the
  other share at least :data:`MIN_SHARED` hardware parts (GPU serials or UUIDs, HCA port GUIDs,
  NIC MACs) and more than half of the smaller set: a GPU moved from one node to another joins
  nothing;
* a group of joined names is kept under the name a ``--local`` run used (the node's own name),
  else under its most recently used name that is not an address, else its most recently used name;
* every name gets a row in ``legacy_names``: the node it now belongs to and how, or that it was
  left as it is and why.

A name left as it is joins a node later, when a run reaches that node by the same name, or by a
name whose short form is the node's identity (:func:`adopt_legacy_names`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from preflight.history.schema import placeholders
from preflight.identity import is_address, short_hostname
from preflight.registry import kept_metrics

MIN_SHARED = 2


def _hardware(node: str, part: str) -> bool:
    """Whether a part's identity is the hardware's own, not made of the node's name and a slot."""
    return not part.startswith(f"{node}:")


def plan_joins(
    part_sets: Mapping[str, Sequence[frozenset[str]]],
    together: Iterable[tuple[str, str]],
    local_names: Iterable[str],
    last_used: Mapping[str, str],
) -> tuple[dict[str, str], dict[str, str]]:
    """The joins of the rule above, from each name's part sets (hardware identities only), the
    pairs of names some run reached both of, the names ``--local`` runs used, and when each name
    was last used. Returns name -> the node it becomes, and name -> how (a sentence)."""
    parent = {name: name for name in last_used}

    def root(name: str) -> str:
        while parent[name] != name:
            parent[name] = parent[parent[name]]
            name = parent[name]
        return name

    apart = {frozenset(pair) for pair in together}
    shared_by: dict[frozenset[str], int] = {}
    by_part: dict[str, set[str]] = {}
    for name, sets in part_sets.items():
        for part in set().union(*sets) if sets else set():
            by_part.setdefault(part, set()).add(name)
    candidates = {frozenset((a, b)) for names in by_part.values() for a in names for b in names if a < b}
    for pair in sorted(candidates, key=sorted):
        a, b = sorted(pair)
        if pair in apart:
            continue
        best = max(
            (len(x & y), min(len(x), len(y))) for x in part_sets.get(a, ()) for y in part_sets.get(b, ())
        )
        if best[0] >= MIN_SHARED and best[0] * 2 > best[1]:
            shared_by[pair] = best[0]
            parent[root(a)] = root(b)
    groups: dict[str, list[str]] = {}
    for name in last_used:
        groups.setdefault(root(name), []).append(name)
    local = set(local_names)
    node_of: dict[str, str] = {}
    how: dict[str, str] = {}
    for names in groups.values():
        if len(names) == 1:
            (name,) = names
            node_of[name] = name
            reason = (
                "no other name shares its parts" if part_sets.get(name) else "the store kept no part of it"
            )
            how[name] = f"left as it is: {reason}"
            continue
        newest = sorted(names, key=lambda n: (last_used[n], n), reverse=True)
        chosen = next(
            (n for n in newest if n in local), next((n for n in newest if not is_address(n)), newest[0])
        )
        for name in names:
            node_of[name] = chosen
            shares = max((count for pair, count in shared_by.items() if name in pair), default=0)
            how[name] = f"joined with {', '.join(sorted(set(names) - {name}))}: {shares} parts in common"
    return node_of, how


def join_legacy_names(store: Any) -> None:
    """The migration's step in Python (inside its transaction): join the names kept before
    version 4 where the rule above allows, and record in ``legacy_names`` what became of each."""
    last_used = {
        str(node): str(at)
        for node, at in store.query(
            "SELECT n.node, MAX(r.started_at) FROM nodes n JOIN runs r ON r.id = n.run_id GROUP BY n.node"
        )
    }
    sets: dict[str, dict[str, set[str]]] = {}
    for node, digest, part in store.query(
        "SELECT n.node, p.digest, p.part FROM nodes n JOIN set_parts p ON p.digest = n.parts_digest"
        " GROUP BY n.node, p.digest, p.part"
    ):
        if _hardware(str(node), str(part)):
            sets.setdefault(str(node), {}).setdefault(str(digest), set()).add(str(part))
    part_sets = {node: [frozenset(s) for s in by_digest.values()] for node, by_digest in sets.items()}
    together = _reached_together(store, part_sets)
    local = [str(n) for (n,) in store.query(
        "SELECT DISTINCT n.node FROM nodes n JOIN runs r ON r.id = n.run_id WHERE r.local = 1"
    )]  # fmt: skip
    node_of, how = plan_joins(part_sets, together, local, last_used)
    for name in sorted(node_of):
        if node_of[name] != name:
            rename_node(store, name, node_of[name])
        store.execute(
            "INSERT INTO legacy_names (name, node, how) VALUES (?, ?, ?)", (name, node_of[name], how[name])
        )


def _reached_together(store: Any, part_sets: Mapping[str, Sequence[frozenset[str]]]) -> list[tuple[str, str]]:
    """The pairs of names sharing a part that some run reached both of (only those can be joined,
    so only they are asked about)."""
    by_part: dict[str, set[str]] = {}
    for name, found in part_sets.items():
        for part in set().union(*found):
            by_part.setdefault(part, set()).add(name)
    pairs = sorted({(a, b) for names in by_part.values() for a in names for b in names if a < b})
    return [
        (a, b)
        for a, b in pairs
        if store.query(
            "SELECT 1 FROM nodes x JOIN nodes y ON x.run_id = y.run_id"
            " WHERE x.node = ? AND y.node = ? LIMIT 1",
            (a, b),
        )
    ]


def rename_node(store: Any, old: str, new: str) -> None:
    """Every row of ``old`` kept under ``new`` from now on: its runs' nodes, part sets, findings
    (their keys too), rates (a pair's names sorted again) and the parts named after it."""
    store.execute("UPDATE nodes SET node = ? WHERE node = ?", (new, old))
    store.execute("UPDATE part_sets SET node = ? WHERE node = ?", (new, old))
    store.execute(
        "UPDATE findings SET node = ?, entity = ?, finding_key = check_name || '/' || ? || '/' || cause"
        " WHERE node = ?",
        (new, new, new, old),
    )
    pairs = kept_metrics("pair")  # a pair's rate names its second node as its part
    marks = placeholders(pairs)
    store.execute("UPDATE rates SET node = ? WHERE node = ?", (new, old))
    store.execute(f"UPDATE rates SET part = ? WHERE metric IN ({marks}) AND part = ?", (new, *pairs, old))
    later = 'node COLLATE "C" > part COLLATE "C"' if store.dialect == "postgresql" else "node > part"
    store.execute(
        "UPDATE rates SET node = part, part = node"
        f" WHERE metric IN ({marks}) AND {later} AND (node = ? OR part = ?)",
        (*pairs, new, new),
    )
    # Parts known by the node's name and a slot ("node3:0000:04:00.0").
    prefix = f"{old}:"
    for table in ("set_parts", "findings", "rates"):
        store.execute(
            f"UPDATE {table} SET part = ? || substr(part, ?) WHERE substr(part, 1, ?) = ?",
            (f"{new}:", len(prefix) + 1, len(prefix), prefix),
        )


def adopt_legacy_names(store: Any, reached: Mapping[str, str]) -> list[tuple[str, str]]:
    """Join the names left as they were by the migration to the nodes of a run that reached them:
    ``reached`` maps the names that reached this run's nodes to their identities. A legacy name
    joins a node when the run reached the node by that very name, or the name's short form is the
    node's identity (``gpu01.cluster.local`` for ``gpu01``). The (name, node) pairs joined, in one
    transaction; where there is nothing to join (the common case) it costs one read."""
    left = {str(name) for (name,) in store.query("SELECT name FROM legacy_names WHERE node = name")}
    identities = set(reached.values())
    joins = []
    for name in sorted(left):
        node = reached.get(name)
        if node is None and not is_address(name) and short_hostname(name) in identities:
            node = short_hostname(name)
        if node is not None and node != name:
            joins.append((name, node))
    if joins:
        with store.transaction():
            for name, node in joins:
                _adopt(store, name, node)
    return joins


def _adopt(store: Any, name: str, node: str) -> None:
    """``name``'s rows under ``node``, unless another run joined it meanwhile."""
    if not store.query("SELECT 1 FROM legacy_names WHERE name = ? AND node = name", (name,)):
        return
    rename_node(store, name, node)
    store.execute("UPDATE legacy_names SET node = ? WHERE node = ?", (node, name))
    how = f"joined when a run reached {node} as {name}"
    store.execute("UPDATE legacy_names SET how = ? WHERE name = ?", (how, name))
