"""How ``ports`` presents itself: who reaches whom (a heatmap of the probes between nodes),
the blocked probes grouped by target, each node's listeners and route to the master, and what
to do about each kind of finding.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

from checks.ports.details import NAME, NodeReport, PortsDetails
from checks.ports.judge import MATRIX_MAX_NODES
from preflight.model import CheckResult, RunReport
from preflight.nodeset import fold, natural_key
from preflight.view import (
    MAX_TABLE_ROWS,
    Block,
    Cell,
    Chart,
    Figure,
    Heatmap,
    Legend,
    Note,
    Presentation,
    Table,
    TCell,
    advice_by_item,
    plain,
    scalar,
)

# The order of a cell's ports in its tooltip.
_KIND_ORDER = {"rendezvous": 0, "extra": 1, "ephemeral": 2}


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _details(results: Sequence[CheckResult]) -> PortsDetails:
    """The details that carry the matrix: the pass's, or the first finding's."""
    for r in results:
        if "nodes" in r.details or "matrix" in r.details:
            return cast(PortsDetails, r.details)
    return {}


def _reach(details: PortsDetails, nodes: Mapping[str, NodeReport]) -> Chart | None:
    """Who reaches whom: one cell per (from, to), red where a port is blocked."""
    matrix = details.get("matrix")
    port = details.get("port")
    if not isinstance(matrix, Mapping) or not matrix:
        return None
    names = sorted(
        set(matrix) | {t for row in matrix.values() if isinstance(row, Mapping) for t in row},
        key=natural_key,
    )
    cells: dict[tuple[int, int], Cell] = {}
    for i, src in enumerate(names):
        for j, dst in enumerate(names):
            if i == j:
                cells[(i, j)] = Cell("self", "", f"{src} (itself)")
                continue
            kinds = (matrix.get(src) or {}).get(dst) if isinstance(matrix.get(src), Mapping) else None
            if not isinstance(kinds, Mapping) or not kinds:
                cells[(i, j)] = Cell("none", "", f"{src} → {dst}: not probed")
                continue
            bad = {k: v for k, v in kinds.items() if v != "open"}
            parts = []
            for kind, status in sorted(kinds.items(), key=lambda ks: _KIND_ORDER.get(ks[0], 1)):
                number = (
                    port
                    if kind == "rendezvous"
                    else (_mapping(nodes.get(dst)).get("ephemeral") if kind == "ephemeral" else None)
                )
                where = f" :{number}" if number else ""
                parts.append(f"{kind}{where} {status}")
            tip = f"{plain(src)} → {plain(dst)}: " + ", ".join(plain(p) for p in parts)
            if bad:
                cells[(i, j)] = Cell("st-fail", "✕", tip)
            else:
                cells[(i, j)] = Cell("st-pass", "✓", tip)
    shown = [plain(n) for n in names]
    figure: Figure = Heatmap(
        shown,
        shown,
        cells,
        label="Port probes between nodes",
        row_axis="from",
        col_axis="to",
        cell_px=30 if len(names) <= 16 else 18,
    )
    return Chart(
        "Who reaches whom",
        figure,
        caption="Each cell is one node probing another on the rendezvous port"
        + (f" {port}" if port else "")
        + " and on the target's ephemeral port; hover a cell for each port's result.",
        legend=[Legend("all ports open", "st-pass"), Legend("a port blocked", "st-fail")],
    )


def _blocked(details: PortsDetails) -> Table | None:
    """Blocked probes by (target, port, kind, result), their sources folded."""
    blocked = details.get("blocked")
    if not isinstance(blocked, list) or not blocked:
        return None
    groups: dict[tuple[str, Any, str, str], list[str]] = {}
    for p in blocked:
        if isinstance(p, Mapping):
            key = (str(p.get("to")), p.get("port"), str(p.get("kind")), str(p.get("status")))
            groups.setdefault(key, []).append(str(p.get("from")))
    rows = [
        [
            TCell(plain(to), "mono"),
            TCell(str(port_), "mono"),
            TCell(plain(kind)),
            TCell(plain(status), "st-text-fail"),
            TCell(plain(fold(sources)), "mono"),
        ]
        for (to, port_, kind, status), sources in sorted(groups.items(), key=lambda kv: natural_key(kv[0][0]))
    ]
    return Table(("to", "port", "kind", "result", "from"), rows[:MAX_TABLE_ROWS], title="Blocked")


def _listeners(details: PortsDetails, nodes: Mapping[str, NodeReport]) -> Table:
    """Each node's listeners, its ephemeral port and its route to the master."""
    rows = []
    for name in sorted(nodes, key=natural_key):
        node = _mapping(nodes[name])
        route = _mapping(node.get("route"))
        listening = _mapping(node.get("listening"))
        listen_text = ", ".join(f"{plain(p)} {plain(s)}" for p, s in listening.items()) or "—"
        bad_listen = any(s != "ok" for s in listening.values())
        rows.append(
            [
                TCell(plain(name), "mono"),
                TCell(listen_text, "mono st-text-fail" if bad_listen else "mono"),
                TCell(scalar(node.get("ephemeral")), "mono"),
                TCell(plain(route.get("dev", "—")) if route else "—", "mono"),
                TCell(plain(route.get("src", "—")) if route else "—", "mono"),
                TCell(scalar(route.get("mtu")) if route else "—", "mono"),
                TCell(plain(node.get("error", "")), "st-text-fail" if node.get("error") else ""),
            ]
        )
    master = details.get("master") or details.get("master_address")
    return Table(
        ("node", "listening", "ephemeral", "route dev", "source address", "MTU", "error"),
        rows,
        title=f"Listeners and the route to the master {plain(master)}" if master else "Listeners",
    )


def ports_blocks(report: RunReport) -> list[Block]:
    """The section's evidence: the matrix (or a note where it was not kept), the blocked
    probes, and the listeners up to :data:`MATRIX_MAX_NODES` nodes."""
    details = _details(report.results_for(NAME))
    listed = details.get("nodes")
    nodes: Mapping[str, NodeReport] = listed if isinstance(listed, Mapping) else {}
    blocks: list[Block] = []
    reach = _reach(details, nodes)
    if reach is not None:
        blocks.append(reach)
    elif nodes:
        blocks.append(
            Note(
                f"The probe matrix is kept only for up to {MATRIX_MAX_NODES} nodes; "
                "the blocked probes are listed below."
            )
        )
    blocked = _blocked(details)
    if blocked is not None:
        blocks.append(blocked)
    if nodes and len(nodes) <= MATRIX_MAX_NODES:
        blocks.append(_listeners(details, nodes))
    return blocks


PRESENTATION = Presentation(
    heading="Ports",
    about="the rendezvous, job and ephemeral ports are open between every pair of nodes",
    evidence=ports_blocks,
    advice=advice_by_item(
        {
            "probe": "Open the port between the nodes named (firewall rule, security group), or fix the "
            "route; the job cannot rendezvous or connect otherwise.",
            "cannot_reach": "Find what drops the named node's connections while the other nodes get through: "
            "its outbound firewall (iptables -S OUTPUT), its route to the nodes it cannot reach (ip route "
            "get ADDRESS), or a rule on those nodes against its address alone (an allow-list, a security "
            "group); or run the job without it.",
            "listen": "Find what holds the port on that node (ss -ltnp) and stop it, or run the job "
            "on another --port.",
            "route": "Pin the interface: set NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME on every node.",
            "neighbours": "Raise net.ipv4.neigh.default.gc_thresh1/2/3 on the nodes named (sysctl, and "
            "in /etc/sysctl.d to keep it) above the number of peers on their subnet.",
        }
    ),
)
