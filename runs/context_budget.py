"""A run's context budget: how many tokens of tool results its model is given, and what happens beyond.

A run may set `context_budget` (tokens) when it starts; otherwise its tenant's `default_context_budget`
applies, read once at that moment. Each result's tokens are counted as the model reads it
(`ToolCall.result_tokens`, lib/tokens.py, in the encoding of the model the run names). After each batch,
while the results still in the model's context add up to more than the budget, the oldest is replaced
there by a summary line and a reference id (`ToolCall.summarized_at` is set; its stored result is kept
whole). The batch's own results carry their summary in place of their content; results the model was
given in earlier batches are listed under the response's `context.replaced`, for the agent (the SDK's
integrations do it) to replace in the history it keeps. The newest result is never replaced: the model
must see what it just asked for, and neither is one of at most `SUMMARY_TOKENS` (its summary would
weigh as much). `describe_result(ref)` (runs/meta_tools.py) gives a replaced result back
in full, redacted as it was stored, and only to the run that holds it. The trace records each replacement
as a `context.replaced: <skill> (<call id>) now a summary` span on the call.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.db import transaction
from django.utils import timezone

from lib import tokens
from runs.errors import NotFound
from runs.models import CallStatus, Run, ToolCall
from traces.recording import save_spans, unsaved_span

REF_PREFIX = "res_"
SPAN_NAME = "context.replaced"
SUMMARY_TOKENS = 80  # about what a summary line costs: a result this small is never replaced by one
REF_PATTERN = rf"^{REF_PREFIX}[0-9]{{1,18}}$"
_REF = re.compile(REF_PATTERN)


def ref_of(call_pk: int) -> str:
    return f"{REF_PREFIX}{call_pk}"


def budget_for(*, asked: int | None, tenant) -> int | None:
    """The run's budget: what it asked for, else its tenant's default (None: no budget)."""
    return asked if asked is not None else tenant.default_context_budget


def result_tokens(content, *, model: str) -> int:
    return tokens.count(tokens.as_model_text(content), model=model)


def _shape(content) -> str:
    if isinstance(content, list):
        return f"a list of {len(content)} items"
    if isinstance(content, dict):
        keys = sorted(content, key=lambda key: not isinstance(content[key], list))  # its lists first
        named = [f"{key} ({len(content[key])} items)" if isinstance(content[key], list) else str(key) for key in keys]
        shown = ", ".join(named[:6]) + (", …" if len(named) > 6 else "")
        return f"an object with {shown}" if keys else "an empty object"
    return "text"


def summary_line(*, name: str, call_id: str, content, tokens_of: int, ref: str, budget: int) -> str:
    return (
        f"The result of {name} (call {call_id}: {_shape(content)}, {tokens_of} tokens) was replaced to keep this "
        f"run's tool results within {budget} tokens. Call describe_result with ref {ref} to read it in full."
    )


@dataclass
class Fitted:
    """What a batch changed in the model's context."""

    budget: int | None = None
    used: int = 0
    replaced: list[dict] = field(default_factory=list)  # every result replaced by this batch, oldest first

    def as_note(self) -> dict:
        return {"budget": self.budget, "used_tokens": self.used, "replaced": self.replaced}


def fit_results(*, run: Run, results: list[dict]) -> Fitted:
    """Replace the oldest results beyond the run's budget (see the module docstring). `results` are the
    batch's, as the gate returned them; those replaced get their summary in place of their content."""
    if run.context_budget is None:
        return Fitted()
    in_context = list(
        ToolCall.objects.filter(run=run, status=CallStatus.SUCCEEDED, summarized_at__isnull=True, result_tokens__gt=0)
        .order_by("created_at", "position", "pk")
        .values_list("pk", "result_tokens")
    )
    used = sum(count for _, count in in_context)
    chosen: list[int] = []
    for pk, count in in_context[:-1]:  # the newest result stays
        if used <= run.context_budget:
            break
        if count <= SUMMARY_TOKENS:
            continue  # its summary would cost about as much as it does
        chosen.append(pk)
        used -= count
    fitted = Fitted(budget=run.context_budget, used=used)
    if chosen:
        fitted.replaced = _replace(run, chosen)
    by_call_id = {entry["call_id"]: entry for entry in fitted.replaced}
    for result in results:
        entry = by_call_id.get(result.get("call_id")) if result.get("status") == "ok" else None
        if entry is not None:
            result["content"] = {"summary": entry["summary"], "ref": entry["ref"]}
            result["context_replaced"] = True
    return fitted


def _replace(run: Run, pks: list[int]) -> list[dict]:
    now = timezone.now()
    with transaction.atomic():
        calls = list(
            ToolCall.objects.select_for_update()
            .filter(pk__in=pks, summarized_at__isnull=True)
            .order_by("created_at", "position", "pk")
        )
        ToolCall.objects.filter(pk__in=[call.pk for call in calls]).update(summarized_at=now)
        replaced, spans = [], []
        for call in calls:
            ref = ref_of(call.pk)
            content = (call.result or {}).get("content")
            line = summary_line(
                name=call.name,
                call_id=call.call_id,
                content=content,
                tokens_of=call.result_tokens,
                ref=ref,
                budget=run.context_budget,
            )
            replaced.append({"call_id": call.call_id, "ref": ref, "tokens": call.result_tokens, "summary": line})
            spans.append(
                unsaved_span(
                    run=run,
                    kind="other",
                    name=f"{SPAN_NAME}: {call.name} ({call.call_id}) now a summary",
                    started_at=now,
                    ended_at=now,
                    call=call,
                    skill_name=call.name,
                    outcome="replaced",
                    attributes={
                        "airlock.context.ref": ref,
                        "airlock.context.replaced_tokens": call.result_tokens,
                        "airlock.context.budget_tokens": run.context_budget,
                    },
                )
            )
        save_spans(spans)
    return replaced


def described_call(ref: object, *, run: Run) -> ToolCall | None:
    """The call of this run whose result `ref` names (None for any other ref)."""
    if not isinstance(ref, str) or not _REF.match(ref):
        return None
    return ToolCall.objects.filter(run=run, pk=int(ref[len(REF_PREFIX) :]), status=CallStatus.SUCCEEDED).first()


def describe(ref: str, *, run: Run) -> dict:
    """A result of this run in full, as stored (redacted); any other ref reads as unknown."""
    call = described_call(ref, run=run)
    if call is None:  # another run's ref and one that never existed read the same
        raise NotFound(f"There is no result {ref} in this run.", code="unknown_result")
    stored = call.result or {}
    described = {"ref": ref, "call_id": call.call_id, "name": call.name, "content": stored.get("content")}
    if stored.get("provenance"):
        described["provenance"] = stored["provenance"]
    return described


__all__ = [
    "REF_PATTERN",
    "Fitted",
    "budget_for",
    "describe",
    "described_call",
    "fit_results",
    "ref_of",
    "result_tokens",
]
