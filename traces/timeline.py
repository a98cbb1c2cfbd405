"""A trace as waterfall rows: depth-first order of the span tree on one shared time axis.

One query loads the few columns every row needs for the whole trace (cheap even at 5,000
spans); pages of rows are then rendered on demand, so the page size, not the trace size, bounds
the HTML. Attributes are loaded only for the side panel.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from django.db.models import FloatField, Func, QuerySet
from django.db.models.fields.json import KeyTextTransform
from django.db.models.functions import Coalesce

from traces.models import Span

PAGE_SIZE = 200
ROW_FIELDS = (
    "pk",
    "span_id",
    "parent_span_id",
    "kind",
    "name",
    "duration_ms",
    "skill_name",
    "skill_version",
    "verdict",
    "outcome",
    "error_class",
    "call_id",
    "source",
)


class Epoch(Func):
    """Seconds since 1970 as a float, computed by the database: turning 10,000 timestamps into
    aware datetimes in Python was most of the timeline's server time."""

    output_field = FloatField()
    template = "EXTRACT(EPOCH FROM %(expressions)s)"

    def as_sqlite(self, compiler, connection, **extra_context):
        return self.as_sql(
            compiler, connection, template="((julianday(%(expressions)s) - 2440587.5) * 86400.0)", **extra_context
        )


@dataclass
class Row:
    values: dict[str, Any]
    depth: int
    offset_pct: float
    width_pct: float

    def __getattr__(self, name: str) -> Any:
        try:
            return self.values[name]
        except KeyError:
            raise AttributeError(name) from None

    @property
    def approval_id(self) -> str:
        return self.values.get("approval_id") or ""

    @property
    def marker(self) -> str:
        """What the row's marker shows: an error, a verdict, or an approval step."""
        if self.values["error_class"]:
            return "error"
        if self.values["kind"] in ("approval", "approval_request", "approval_decision"):
            return "approval"
        return self.values["verdict"] or ""


@dataclass
class Timeline:
    rows: list[Row]
    started_at: datetime | None
    ended_at: datetime | None
    total: int

    @property
    def duration_ms(self) -> float:
        if not self.started_at or not self.ended_at:
            return 0.0
        return (self.ended_at - self.started_at).total_seconds() * 1000

    def page(self, offset: int, size: int = PAGE_SIZE) -> list[Row]:
        return self.rows[offset : offset + size]

    def ticks(self, count: int = 5) -> list[dict[str, float]]:
        return [{"pct": 100 * i / count, "ms": self.duration_ms * i / count} for i in range(count + 1)]


def build_timeline(spans: QuerySet[Span]) -> Timeline:
    values = list(
        spans.order_by("started_at", "pk").values(
            *ROW_FIELDS,
            start_s=Epoch("started_at"),
            end_s=Epoch("ended_at"),
            approval_id=Coalesce(
                KeyTextTransform("approval_id", "attributes"), KeyTextTransform("airlock.approval.id", "attributes")
            ),
            local_flag=KeyTextTransform("airlock.local.flag_verdict", "attributes"),  # runs.local_calls
        )
    )
    if not values:
        return Timeline(rows=[], started_at=None, ended_at=None, total=0)
    first = min(v["start_s"] for v in values)
    last = max((v["end_s"] or v["start_s"]) for v in values)
    total_ms = max((last - first) * 1000, 0.001)
    ids = {v["span_id"] for v in values}
    children: dict[str, list[dict]] = {}
    roots = []
    for v in values:
        parent = v["parent_span_id"]
        if parent and parent in ids and parent != v["span_id"]:
            children.setdefault(parent, []).append(v)
        else:
            roots.append(v)
    rows: list[Row] = []
    seen: set[str] = set()
    stack = [(v, 0) for v in reversed(roots)]
    while stack:  # iterative depth-first walk: deep traces must not hit the recursion limit
        v, depth = stack.pop()
        if v["span_id"] in seen:
            continue
        seen.add(v["span_id"])
        offset = (v["start_s"] - first) * 1000
        width = ((v["end_s"] or v["start_s"]) - v["start_s"]) * 1000
        rows.append(
            Row(
                values=v,
                depth=min(depth, 40),
                offset_pct=round(100 * offset / total_ms, 3),
                width_pct=round(max(100 * width / total_ms, 0.2), 3),
            )
        )
        stack.extend((child, depth + 1) for child in reversed(children.get(v["span_id"], [])))
    for v in values:  # spans caught in a parent cycle still appear, at the top level
        if v["span_id"] not in seen:
            rows.append(Row(values=v, depth=0, offset_pct=0, width_pct=0.2))
    return Timeline(
        rows=rows,
        started_at=datetime.fromtimestamp(first, tz=UTC),
        ended_at=datetime.fromtimestamp(last, tz=UTC),
        total=len(rows),
    )
