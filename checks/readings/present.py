"""How ``readings`` shows itself: each reading that stands out, with its part and its like parts'
value, and what to do about each kind of finding.
"""

from __future__ import annotations

from collections.abc import Sequence

from checks.readings.details import NAME
from preflight.model import RunReport
from preflight.view import MAX_TABLE_ROWS, Block, Presentation, Table, TCell, advice_by_item, listed, plain


def _rows(report: RunReport) -> list[list[TCell]]:
    rows: list[list[TCell]] = []
    for result in report.results_for(NAME):
        for field in listed(result.details.get("fields")):
            if not isinstance(field, dict):
                continue
            for part in listed(field.get("parts")):
                if isinstance(part, dict):
                    rows.append(
                        [
                            TCell(plain(part.get("host", "")), "mono"),
                            TCell(plain(part.get("part", "") or "the node")),
                            TCell(plain(field.get("words", ""))),
                            TCell(plain(part.get("value", "")), "mono odd odd-fail"),
                            TCell(plain(field.get("usual", "") or "no majority"), "mono"),
                        ]
                    )
    return rows


def evidence(report: RunReport) -> Sequence[Block]:
    rows = _rows(report)
    if not rows:
        return []
    shown = rows[:MAX_TABLE_ROWS]
    return [
        Table(
            ("node", "part", "reading", "value", "like parts"),
            shown,
            title="Readings that stand out from like parts",
            note=f"{len(rows) - len(shown)} more in the JSON report" if len(rows) > len(shown) else "",
        )
    ]


PRESENTATION = Presentation(
    heading="Readings of like parts",
    about="every reading of each GPU, port, network card and node against the like parts of the other nodes",
    evidence=evidence,
    advice=advice_by_item(
        {
            "odd_setting": "Bring the part named in line with its like parts (the value most of them "
            "have is given): a firmware or BIOS update missed on that node, a setting changed by hand, "
            "a card in another slot. Where no majority decides, choose the value the cluster should "
            "have and set it everywhere.",
            "odd_reading": "Look at the part named while the node is idle: a GPU far hotter than its like "
            "GPUs has a fan, heat sink or airflow fault (nvidia-smi -q -d TEMPERATURE,PERFORMANCE); one "
            "drawing far more power at idle holds a context or clocks it should not (nvidia-smi -q -d "
            "POWER,CLOCK).",
            "odd_counter": "A counter since boot that stands out from like parts' says this part has "
            "had trouble: watch whether it grows during the job, and reseat or replace the part if it "
            "keeps counting.",
        }
    ),
)
