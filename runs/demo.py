"""Demo traces for `seed_demo`: one support run with model turns, calls of every verdict, an
approval and an error, plus an alert rule on a demo skill; and a run whose agent decided calls locally while
Airlock was unreachable, one of them flagged on upload. Idempotent."""

from datetime import timedelta

from django.utils import timezone

from policies.bundles import bundle_for, settings_of
from policies.services import set_local_decisions
from registry.models import Skill, Snapshot
from runs import lifecycle
from runs.local_calls import record_local_calls
from runs.models import Run, RunStatus
from traces.models import AlertKind, AlertRule, Trace
from traces.recording import ensure_trace, record_span

DEMO_TASK = "Demo: refund order 1182 and tell the customer"
OUTAGE_TASK = "Demo: answer customer c-100 while Airlock was unreachable"
# What runs/result_facts.py records on a call span for a result the model was given.
RESULT_FACTS = {
    "airlock.result.bytes": 2210,
    "airlock.result.tokens": 612,
    "airlock.result.encoding": "o200k_base",
    "airlock.adapter": "python",
    "airlock.adapter.version": "0.1.0",
}


def seed(context) -> None:
    seed_trace(context)
    seed_local_calls(context)


def seed_local_calls(context) -> None:
    """A run tainted by an untrusted e-mail before the outage: the SDK's bundle (issued earlier) allowed a local
    note, which today's rules would only run with a person's confirmation, so the upload flags it."""
    agent = context.agents.get("acme/support-bot")
    snapshot = Snapshot.objects.order_by("-number").first()
    if agent is None or snapshot is None or Run.objects.filter(task=OUTAGE_TASK).exists():
        return
    if Skill.objects.filter(name__in=["support.read_case_notes", "drafts.save_case_note"]).count() != 2:
        return
    start = timezone.now() - timedelta(minutes=7)
    run = Run.objects.create(
        tenant=agent.tenant,
        agent=agent,
        end_user="dave@acme.example",
        task=OUTAGE_TASK,
        snapshot=snapshot,
        created_at=start,
        tainted=True,
        taint_source="support.read_inbound_email (c-1) returned untrusted content",
    )
    ensure_trace(run)
    local = settings_of(agent.tenant)
    if agent.role not in local.agent_roles:  # the tenant opted its support agents in before the outage
        set_local_decisions(
            tenant=agent.tenant,
            agent_roles=[*local.agent_roles, agent.role],
            bundle_validity=local.bundle_validity,
            by_label="demo",
        )
    bundle = bundle_for(agent).body["number"]  # the bundle the agent's SDK decided under

    def spooled(sequence: int, skill: str, arguments: dict, result: dict, ms: int) -> dict:
        decided = start + timedelta(milliseconds=ms)
        return {
            "call_id": f"local-{sequence}",
            "skill": skill,
            "version": "1.0.0",
            "arguments": arguments,
            "verdict": "allow",
            "reason": "allowed by the decision bundle (Airlock unreachable)",
            "bundle_number": bundle,
            "decided_at": decided.isoformat(),
            "status": "succeeded",
            "result": result,
            "finished_at": (decided + timedelta(milliseconds=35)).isoformat(),
            "sequence": sequence,
        }

    record_local_calls(
        run=run,
        agent=agent,
        calls=[
            spooled(1, "support.read_case_notes", {"customer_id": "c-100"}, {"notes": ["prefers e-mail"]}, 1200),
            spooled(2, "support.read_case_notes", {"customer_id": "c-101"}, {"notes": []}, 2600),
            spooled(
                3,
                "drafts.save_case_note",
                {"customer_id": "c-100", "note": "refund promised"},
                {"note_id": "n-7"},
                4100,
            ),
        ],
    )
    lifecycle.close_run(run, status=RunStatus.COMPLETED)
    context.lines.append(f"runs: a run with calls decided locally during an outage ({OUTAGE_TASK})")


def seed_trace(context) -> None:
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
        ("tool_call", read, 1450, 1710, read, "allow", "succeeded", RESULT_FACTS),
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
