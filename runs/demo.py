"""Demo traces for `seed_demo`: one support run with model turns, calls of every verdict, an
approval and an error, plus an alert rule on a demo skill. Idempotent."""

from datetime import timedelta

from django.utils import timezone

from registry.models import Skill, Snapshot
from runs import lifecycle
from runs.models import Run, RunStatus
from traces.models import AlertKind, AlertRule, Trace
from traces.recording import ensure_trace, record_span

DEMO_TASK = "Demo: refund order 1182 and tell the customer"


def seed(context) -> None:
    agent = context.agents.get("acme/support-bot")
    snapshot = Snapshot.objects.order_by("-number").first()
    if agent is None or snapshot is None or Trace.objects.filter(name=DEMO_TASK).exists():
        return
    skills = list(Skill.objects.order_by("name").values_list("name", flat=True)[:3]) or ["orders.lookup"]
    read, write, external = (skills * 3)[:3]
    start = timezone.now() - timedelta(minutes=12)
    run = Run.objects.create(
        tenant=agent.tenant,
        agent=agent,
        end_user="carol@acme.example",
        task=DEMO_TASK,
        snapshot=snapshot,
        created_at=start,
    )
    lifecycle.close_run(run, status=RunStatus.COMPLETED)
    ensure_trace(run)

    def at(ms: int):
        return start + timedelta(milliseconds=ms)

    root = record_span(run=run, kind="run", name="support run", started_at=at(0), ended_at=at(9400))
    steps = [
        ("model_turn", "chat gpt-5 (plan)", 20, 1400, "", "", "", {"gen_ai.usage.input_tokens": 1840}),
        ("tool_call", read, 1450, 1710, read, "allow", "succeeded", {"airlock.result.bytes": 2210}),
        ("model_turn", "chat gpt-5 (decide)", 1750, 3100, "", "", "", {"gen_ai.usage.input_tokens": 2630}),
        ("tool_call", write, 3150, 3190, write, "confirm", "awaiting_approval", {}),
        ("approval", "approval.approved", 3190, 7200, write, "confirm", "approved", {"decided_by": "bob"}),
        ("tool_call", f"{write} (approved)", 7210, 7660, write, "confirm", "succeeded", {}),
        ("tool_call", external, 7700, 7720, external, "deny", "denied", {}),
        ("tool_call", read, 7750, 8950, read, "allow", "failed", {}),
        ("model_turn", "chat gpt-5 (answer)", 9000, 9390, "", "", "", {"gen_ai.usage.input_tokens": 3120}),
    ]
    for kind, name, begin, end, skill, verdict, outcome, attrs in steps:
        record_span(
            run=run,
            kind=kind,
            name=name,
            started_at=at(begin),
            ended_at=at(end),
            parent_span_id=root.span_id,
            skill_name=skill,
            verdict=verdict,
            outcome=outcome,
            error_class="timeout_unknown" if outcome == "failed" else ("authorization" if verdict == "deny" else ""),
            attributes=attrs,
        )
    AlertRule.objects.get_or_create(
        skill_name=read,
        kind=AlertKind.ERROR_RATE,
        defaults={"threshold": 0.2, "window": timedelta(hours=1), "min_calls": 5},
    )
    context.lines.append(f"traces: demo trace for acme/support-bot ({DEMO_TASK})")
