"""A node's identity, decided from what the node reported (preflight.identity), and what the facts
probe reads for it (preflight.node.system.gather_identity). The facts are the recorded nodes'
(tests/data/runs/h100_node.json, an H100 node that calls itself x3102c0s41b0n0)."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

from preflight.identity import (
    BOARD_SERIAL,
    GPU_SERIAL,
    HOSTNAME,
    INVENTORY,
    MACHINE_ID,
    PRODUCT_SERIAL,
    identities,
    identity_of,
)
from preflight.node import system
from preflight.node.collect import collect

H100 = json.loads((Path(__file__).parent / "data" / "runs" / "h100_node.json").read_text())


def _facts(**changes: Any) -> dict[str, Any]:
    facts = copy.deepcopy(H100)
    facts.update(changes)
    return facts


def test_a_node_is_its_host_name_whatever_name_reached_it() -> None:
    for alias in ("10.77.0.13", "gpu3", "x3102c0s41b0n0.cluster.local", "[fd00::13]"):
        found = identity_of(alias, _facts())
        assert (found.key, found.source, found.alias) == ("x3102c0s41b0n0", HOSTNAME, alias)
    assert identity_of("n", _facts(hostname="PFNODE3.cluster.local")).key == "pfnode3"


def test_a_host_name_that_names_no_machine_gives_way_to_what_identifies_the_machine() -> None:
    machine = {"machine_id": "3680fb43002d23629f0a84405a651334", "product_serial": "J30ABC12"}
    assert identity_of("n", _facts(hostname="localhost", identity=machine)).source == MACHINE_ID
    serials = {"machine_id": None, "product_serial": "J30ABC12", "board_serial": "BRD-9"}
    found = identity_of("n", _facts(hostname="ubuntu", identity=serials))
    assert (found.key, found.source) == ("serial-J30ABC12", PRODUCT_SERIAL)
    placeholder = {**serials, "product_serial": "To Be Filled By O.E.M."}
    assert identity_of("n", _facts(hostname="", identity=placeholder)).source == BOARD_SERIAL
    nothing = {"machine_id": None, "product_serial": "Default string", "board_serial": "0000000000"}
    with_serials = _facts(hostname="localhost", identity=nothing)
    for gpu, serial in zip(with_serials["gpus"], ("1654922006514", "1654922006513"), strict=False):
        gpu["serial"] = serial
    gpus = identity_of("n", with_serials)
    assert (gpus.key, gpus.source) == ("gpu-1654922006513", GPU_SERIAL)
    assert identity_of("n", _facts(hostname="localhost", identity=nothing)).source == INVENTORY


def test_a_node_not_reached_is_known_by_the_name_that_tried() -> None:
    assert identity_of("10.77.0.13", None).source == INVENTORY
    assert identity_of("10.77.0.13", {}).key == "10.77.0.13"


def test_nodes_of_one_run_with_one_identity_keep_their_own_names() -> None:
    found, clashes = identities(
        {
            "10.77.0.12": _facts(hostname="pfnode"),
            "10.77.0.13": _facts(hostname="pfnode"),
            "10.77.0.14": _facts(hostname="pfnode4"),
            "10.77.0.15": None,
        }
    )
    assert {n: (i.key, i.source) for n, i in found.items()} == {
        "10.77.0.12": ("10.77.0.12", INVENTORY),
        "10.77.0.13": ("10.77.0.13", INVENTORY),
        "10.77.0.14": ("pfnode4", HOSTNAME),
        "10.77.0.15": ("10.77.0.15", INVENTORY),
    }
    assert [(c.key, c.source, c.names) for c in clashes] == [
        ("pfnode", HOSTNAME, ("10.77.0.12", "10.77.0.13"))
    ]
    # One machine ID under two host names (a cloned image) is no clash: the host names decide.
    same = {"machine_id": "3680fb43002d23629f0a84405a651334"}
    _, none = identities(
        {"a": _facts(hostname="n1", identity=same), "b": _facts(hostname="n2", identity=same)}
    )
    assert none == []


def test_the_probe_reports_the_machine_id_as_a_digest_only() -> None:
    raw = "3680fb43002d23629f0a84405a651334\n"
    digest = system.machine_id_digest(raw)
    assert digest is not None and len(digest) == 32 and raw.strip() not in digest
    assert digest == system.machine_id_digest(raw.upper())
    assert system.machine_id_digest("uninitialized\n") is None and system.machine_id_digest("") is None
    facts = collect(skip=[name for name in ("torch", "packages", "nvcc", "net", "hardware", "nccl")])["facts"]
    assert set(facts["identity"]) == {"machine_id", "product_serial", "board_serial"}
    assert identity_of("this machine", facts).source != INVENTORY
