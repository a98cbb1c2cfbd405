"""Per-skill numbers for its owners, over a window, across every tenant.

A call can leave several tool-call spans (the gate's verdict, then the execution after an
approval, or the agent's own report of a client-side run), so numbers are computed per call: the
first span gives the verdict, the last one the outcome and error class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import QuerySet

from traces.models import Span, SpanKind

WINDOWS = {"1h": timedelta(hours=1), "24h": timedelta(hours=24), "7d": timedelta(days=7), "30d": timedelta(days=30)}
BUCKETS = 24
MAX_SAMPLES = 50_000
CONTRACT_CLASSES = ("contract", "contract_violation", "result_validation", "output_validation")
APPROVAL_KINDS = (SpanKind.APPROVAL, SpanKind.APPROVAL_DECISION)
# Read from the spans' attributes (runs/result_facts.py, traces/cost.py; the GenAI conventions for turns).
TOKENS_KEY = "attributes__airlock.result.tokens"
COST_KEY = "attributes__airlock.cost.amount"
CURRENCY_KEY = "attributes__airlock.cost.currency"
INPUT_TOKENS_KEY = "attributes__gen_ai.usage.input_tokens"


def percentile(sorted_values: list[float], fraction: float) -> float | None:
    if not sorted_values:
        return None
    index = min(len(sorted_values) - 1, max(0, round(fraction * (len(sorted_values) - 1))))
    return sorted_values[index]


@dataclass(frozen=True)
class Spread:
    """Mean, median and 95th percentile of one figure taken per run."""

    mean: float | None = None
    p50: float | None = None
    p95: float | None = None

    @classmethod
    def of(cls, values: list[float]) -> Spread:
        if not values:
            return cls()
        ordered = sorted(values)
        return cls(sum(ordered) / len(ordered), percentile(ordered, 0.5), percentile(ordered, 0.95))


@dataclass
class CallFact:
    trace_id: int
    started_at: datetime
    verdict: str = ""
    outcome: str = ""
    error_class: str = ""
    duration_ms: float | None = None
    arguments_sha256: str = ""
    result_bytes: int = 0
    result_tokens: int = 0
    cost: float | None = None
    currency: str = ""
    tenant: str = ""

    @property
    def contract_violation(self) -> bool:
        return self.error_class in CONTRACT_CLASSES or self.outcome == "contract_violation"


def skill_call_spans(skill_name: str, since: datetime, until: datetime) -> QuerySet[Span]:
    return Span.objects.filter(
        skill_name=skill_name, kind=SpanKind.TOOL_CALL, source="airlock", started_at__gte=since, started_at__lt=until
    )


def call_facts(skill_name: str, since: datetime, until: datetime) -> list[CallFact]:
    rows = (
        skill_call_spans(skill_name, since, until)
        .order_by("started_at", "pk")
        .values_list(
            "pk",
            "call_id",
            "trace_id",
            "started_at",
            "verdict",
            "outcome",
            "error_class",
            "duration_ms",
            "arguments_sha256",
            "result_bytes",
            "trace__tenant__name",
            TOKENS_KEY,
            COST_KEY,
            CURRENCY_KEY,
        )[:MAX_SAMPLES]
    )
    facts: dict[object, CallFact] = {}
    for row in rows:
        pk, call_id, trace_id, started, verdict, outcome, error_class, duration, args, size, tenant = row[:11]
        tokens, cost, currency = row[11:]
        key = call_id if call_id is not None else f"span:{pk}"
        fact = facts.get(key)
        if fact is None:
            fact = facts[key] = CallFact(trace_id=trace_id, started_at=started, verdict=verdict, tenant=tenant)
        fact.outcome, fact.error_class = outcome or fact.outcome, error_class
        fact.verdict = fact.verdict or verdict
        if duration is not None:
            fact.duration_ms = max(fact.duration_ms or 0.0, duration)
        fact.arguments_sha256 = args or fact.arguments_sha256
        fact.result_bytes = max(fact.result_bytes, size or 0)
        fact.result_tokens = max(fact.result_tokens, _number(tokens))
        if cost is not None:  # the span that recorded the result carries its cost
            fact.cost, fact.currency = float(_number(cost, float)), str(currency or "")
    return list(facts.values())


def _number(value, kind=int):
    return kind(value) if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0 else kind(0)


def repeats_per_run(facts: list[CallFact]) -> list[int]:
    """How many times each (run, identical arguments) pair occurs, for pairs seen more than once."""
    counts: dict[tuple[int, str], int] = {}
    for fact in facts:
        if fact.arguments_sha256:
            key = (fact.trace_id, fact.arguments_sha256)
            counts[key] = counts.get(key, 0) + 1
    return [n for n in counts.values() if n > 1]


@dataclass
class Bucket:
    start: datetime
    calls: int = 0
    errors: int = 0


@dataclass
class SkillMetrics:
    skill_name: str
    since: datetime
    until: datetime
    calls: int = 0
    errors: int = 0
    errors_by_class: list[tuple[str, int]] = field(default_factory=list)
    verdicts: dict[str, int] = field(default_factory=dict)
    p50_ms: float | None = None
    p95_ms: float | None = None
    approved: int = 0
    declined: int = 0
    repeated_groups: int = 0
    repeated_extra_calls: int = 0
    max_repeats: int = 0
    contract_violations: int = 0
    undeclared_error_codes: list[tuple[str, int]] = field(default_factory=list)
    result_bytes: int = 0
    result_tokens: int = 0
    run_result_bytes: int = 0
    costed_calls: int = 0
    cost_total: float = 0.0
    currency: str = ""
    calls_per_task: Spread = field(default_factory=Spread)
    run_byte_share: Spread = field(default_factory=Spread)
    run_context_share: Spread = field(default_factory=Spread)  # tokens of the model's context, where reported
    runs_reporting_turns: int = 0
    tenants: list[tuple[str, int]] = field(default_factory=list)
    buckets: list[Bucket] = field(default_factory=list)

    @property
    def error_rate(self) -> float:
        return self.errors / self.calls if self.calls else 0.0

    @property
    def confirm_rate(self) -> float:
        return self.verdicts.get("confirm", 0) / self.calls if self.calls else 0.0

    @property
    def deny_rate(self) -> float:
        return self.verdicts.get("deny", 0) / self.calls if self.calls else 0.0

    @property
    def decline_rate(self) -> float:
        decided = self.approved + self.declined
        return self.declined / decided if decided else 0.0

    @property
    def avg_result_bytes(self) -> float:
        return self.result_bytes / self.calls if self.calls else 0.0

    @property
    def avg_result_tokens(self) -> float:
        return self.result_tokens / self.calls if self.calls else 0.0

    @property
    def avg_cost(self) -> float | None:
        return self.cost_total / self.costed_calls if self.costed_calls else None

    @property
    def context_share(self) -> float:
        """This skill's share of all tool-result bytes in the runs that called it."""
        return self.result_bytes / self.run_result_bytes if self.run_result_bytes else 0.0

    @property
    def bucket_max(self) -> int:
        return max((b.calls for b in self.buckets), default=0) or 1

    def chart(self, *, height: float = 86.0, step: float = 10.0) -> list[dict]:
        """Bar geometry for the inline SVG chart (calls, with the failed part in red)."""
        bars = []
        for index, bucket in enumerate(self.buckets):
            calls_h = height * bucket.calls / self.bucket_max
            errors_h = height * bucket.errors / self.bucket_max
            bars.append(
                {
                    "x": index * step,
                    "y": height - calls_h,
                    "h": calls_h,
                    "ey": height - errors_h,
                    "eh": errors_h,
                    "bucket": bucket,
                }
            )
        return bars


def skill_metrics(*, skill_name: str, since: datetime, until: datetime) -> SkillMetrics:
    facts = call_facts(skill_name, since, until)
    m = SkillMetrics(skill_name=skill_name, since=since, until=until, calls=len(facts))
    m.buckets = _buckets(since, until, facts)
    if not facts:
        return m
    by_class: dict[str, int] = {}
    tenants: dict[str, int] = {}
    for fact in facts:
        if fact.error_class:
            by_class[fact.error_class] = by_class.get(fact.error_class, 0) + 1
        if fact.verdict:
            m.verdicts[fact.verdict] = m.verdicts.get(fact.verdict, 0) + 1
        tenants[fact.tenant] = tenants.get(fact.tenant, 0) + 1
    m.errors_by_class = sorted(by_class.items(), key=lambda item: -item[1])
    m.errors = sum(by_class.values())
    m.tenants = sorted(tenants.items(), key=lambda item: -item[1])[:10]
    durations = sorted(f.duration_ms for f in facts if f.duration_ms is not None)
    m.p50_ms, m.p95_ms = percentile(durations, 0.5), percentile(durations, 0.95)
    decided = Span.objects.filter(
        skill_name=skill_name, kind__in=APPROVAL_KINDS, started_at__gte=since, started_at__lt=until
    )
    m.approved = decided.filter(outcome="approved").count()
    m.declined = decided.filter(outcome="declined").count()
    repeats = repeats_per_run(facts)
    m.repeated_groups, m.repeated_extra_calls = len(repeats), sum(n - 1 for n in repeats)
    m.max_repeats = max(repeats, default=0)
    m.contract_violations = sum(1 for f in facts if f.contract_violation)
    m.undeclared_error_codes = undeclared_error_codes(skill_name, since, until)
    m.result_bytes = sum(f.result_bytes for f in facts)
    m.result_tokens = sum(f.result_tokens for f in facts)
    _add_costs(m, facts)
    per_run = per_run_figures(facts)
    run_bytes = _run_result_bytes(set(per_run), since, until)
    m.run_result_bytes = sum(run_bytes.values()) or m.result_bytes
    m.calls_per_task = Spread.of([float(calls) for calls, _ in per_run.values()])
    m.run_byte_share = Spread.of(
        [own / run_bytes[trace] for trace, (_, own) in per_run.items() if run_bytes.get(trace)]
    )
    context = _model_context_tokens(set(per_run), since, until)
    own_tokens = per_run_tokens(facts)
    m.runs_reporting_turns = len(context)
    m.run_context_share = Spread.of([min(1.0, own_tokens[trace] / size) for trace, size in context.items()])
    return m


UNDECLARED_CODE = "airlock.error.undeclared_code"


def undeclared_error_codes(skill_name: str, since: datetime, until: datetime) -> list[tuple[str, int]]:
    """Error codes the skill's service returned that its manifest's `errors` do not declare, most frequent first."""
    spans = skill_call_spans(skill_name, since, until).filter(attributes__has_key=UNDECLARED_CODE)
    counts: dict[str, int] = {}
    for attributes in spans.values_list("attributes", flat=True)[:MAX_SAMPLES]:
        code = str(attributes.get(UNDECLARED_CODE))
        counts[code] = counts.get(code, 0) + 1
    return sorted(counts.items(), key=lambda item: -item[1])


def _add_costs(m: SkillMetrics, facts: list[CallFact]) -> None:
    """The cost of the calls that have one, in the currency most of them use (others are left out)."""
    currencies: dict[str, int] = {}
    for fact in facts:
        if fact.cost is not None:
            currencies[fact.currency] = currencies.get(fact.currency, 0) + 1
    if not currencies:
        return
    m.currency = max(currencies, key=lambda currency: currencies[currency])
    priced = [f.cost for f in facts if f.cost is not None and f.currency == m.currency]
    m.costed_calls, m.cost_total = len(priced), sum(priced)


def per_run_tokens(facts: list[CallFact]) -> dict[int, int]:
    tokens: dict[int, int] = {}
    for fact in facts:
        tokens[fact.trace_id] = tokens.get(fact.trace_id, 0) + fact.result_tokens
    return tokens


def _model_context_tokens(trace_ids: set[int], since: datetime, until: datetime) -> dict[int, int]:
    """The model's context in each run that reports its turns: the most input tokens of any of its turns."""
    turns = Span.objects.filter(
        kind=SpanKind.MODEL_TURN, trace_id__in=list(trace_ids)[:5000], started_at__gte=since, started_at__lt=until
    ).values_list("trace_id", INPUT_TOKENS_KEY)[:MAX_SAMPLES]
    context: dict[int, int] = {}
    for trace_id, tokens in turns:
        if _number(tokens) > 0:
            context[trace_id] = max(context.get(trace_id, 0), _number(tokens))
    return context


def per_run_figures(facts: list[CallFact]) -> dict[int, tuple[int, int]]:
    """(calls, result bytes) of this skill in each run (trace) that called it."""
    figures: dict[int, tuple[int, int]] = {}
    for fact in facts:
        calls, size = figures.get(fact.trace_id, (0, 0))
        figures[fact.trace_id] = (calls + 1, size + fact.result_bytes)
    return figures


def _run_result_bytes(trace_ids: set[int], since: datetime, until: datetime) -> dict[int, int]:
    """Tool-result bytes of every skill in each of those runs (a call's largest span carries its size)."""
    spans = Span.objects.filter(
        kind=SpanKind.TOOL_CALL,
        source="airlock",
        trace_id__in=list(trace_ids)[:5000],
        started_at__gte=since,
        started_at__lt=until,
    )
    per_call: dict[object, tuple[int, int]] = {}
    for pk, call_id, trace_id, size in spans.values_list("pk", "call_id", "trace_id", "result_bytes")[:MAX_SAMPLES]:
        key = call_id if call_id is not None else f"span:{pk}"
        per_call[key] = (trace_id, max(per_call.get(key, (trace_id, 0))[1], size))
    per_run: dict[int, int] = {}
    for trace_id, size in per_call.values():
        per_run[trace_id] = per_run.get(trace_id, 0) + size
    return per_run


def _buckets(since: datetime, until: datetime, facts: list[CallFact]) -> list[Bucket]:
    width = (until - since) / BUCKETS
    buckets = [Bucket(start=since + width * i) for i in range(BUCKETS)]
    for fact in facts:
        index = min(BUCKETS - 1, max(0, int((fact.started_at - since) / width)))
        buckets[index].calls += 1
        buckets[index].errors += 1 if fact.error_class else 0
    return buckets


__all__ = [
    "WINDOWS",
    "CallFact",
    "SkillMetrics",
    "Spread",
    "call_facts",
    "per_run_figures",
    "repeats_per_run",
    "skill_metrics",
    "version_figures",
    "VersionFigures",
]


@dataclass(frozen=True)
class VersionFigures:
    """One skill version's calls over a window: how many, how many failed, how long they took."""

    calls: int
    errors: int
    p50_ms: float | None
    p95_ms: float | None

    @property
    def error_rate(self) -> float:
        return self.errors / self.calls if self.calls else 0.0


def version_figures(*, skill_name: str, since: datetime, until: datetime) -> dict[str, VersionFigures]:
    """Each version's figures side by side (registry.hooks.version_figures), per call as `call_facts` counts:
    a call's last span gives its error class, its longest its duration."""
    rows = (
        skill_call_spans(skill_name, since, until)
        .exclude(skill_version="")
        .order_by("started_at", "pk")
        .values_list("pk", "call_id", "skill_version", "error_class", "duration_ms")[:MAX_SAMPLES]
    )
    calls: dict[object, list] = {}
    for pk, call_id, version, error_class, duration in rows:
        key = call_id if call_id is not None else f"span:{pk}"
        fact = calls.setdefault(key, [version, "", None])
        fact[1] = error_class
        if duration is not None:
            fact[2] = max(fact[2] or 0.0, duration)
    by_version: dict[str, list] = {}
    for version, error_class, duration in calls.values():
        by_version.setdefault(version, []).append((error_class, duration))
    figures = {}
    for version, facts in by_version.items():
        durations = sorted(duration for _, duration in facts if duration is not None)
        figures[version] = VersionFigures(
            calls=len(facts),
            errors=sum(1 for error_class, _ in facts if error_class),
            p50_ms=percentile(durations, 0.5),
            p95_ms=percentile(durations, 0.95),
        )
    return figures
