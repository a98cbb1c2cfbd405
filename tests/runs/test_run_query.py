"""The gate's run query (runs/api/batch_auth.py) is the ORM's, compiled once per connection
(lib/compiled_query.py) and run on every database. These tests load the same rows through it and through
a plain ORM queryset written here, built afresh on each call, and compare them field by field, for runs
in the states an attacker or an accident can leave them in. On PostgreSQL they also check that the
statement the server prepares is the ORM's text, and that it is prepared only while the operator allows."""

from __future__ import annotations

import re
import uuid
from datetime import timedelta

import pytest
from django.db import connection
from django.db.models import Exists, F, OuterRef, Q, Subquery
from django.utils import timezone

from console.models import GateGeneration
from console.services import create_agent, revoke_agent, rotate_agent_key
from runs.api.batch_auth import RUN_QUERY, load_run
from runs.models import IdempotencyRecord, Run, ToolCall
from runs.services import start_run
from tests.runs.factories import grant, make_skill
from traces.models import Trace

pytestmark = pytest.mark.django_db
EXTRAS = ("gate_epoch", "gate_number", "prior_calls", "prior_keys", "trace_pk")


def plain_orm(run_id, lookup: str, call_ids: list[str], keys: list[str]) -> Run | None:
    """The run query as one writes it with the ORM, built afresh: the reference."""
    generation = GateGeneration.objects.filter(pk=1)
    return (
        Run.objects.filter(Q(agent__key_lookup=lookup) | Q(agent__previous_key_lookup=lookup), pk=run_id)
        .filter(tenant=F("agent__tenant"))
        .select_related("agent", "tenant", "snapshot")
        .defer("snapshot__body")
        .annotate(
            gate_epoch=Subquery(generation.values("epoch")),
            gate_number=Subquery(generation.values("number")),
            prior_calls=Exists(ToolCall.objects.filter(run_id=OuterRef("pk"), call_id__in=call_ids)),
            prior_keys=Exists(IdempotencyRecord.objects.filter(tenant_id=OuterRef("tenant_id"), key__in=keys)),
            trace_pk=Subquery(Trace.objects.filter(run_id=OuterRef("pk")).values("pk")[:1]),
        )
        .first()
    )


def assert_same_rows(compiled: Run | None, plain: Run | None) -> None:
    assert (compiled is None) == (plain is None)
    if plain is None:
        return
    for ours, theirs in [
        (compiled, plain),
        (compiled.agent, plain.agent),
        (compiled.tenant, plain.tenant),
        (compiled.snapshot, plain.snapshot),
    ]:
        assert type(ours) is type(theirs)
        assert ours.get_deferred_fields() == theirs.get_deferred_fields()
        assert not ours._state.adding and ours._state.db == theirs._state.db
        for field in type(theirs)._meta.concrete_fields:
            if field.attname in theirs.get_deferred_fields():
                continue
            mine, reference = getattr(ours, field.attname), getattr(theirs, field.attname)
            assert (type(mine), mine) == (type(reference), reference), f"{type(theirs).__name__}.{field.attname}"
    for name in EXTRAS:
        assert (type(getattr(compiled, name)), getattr(compiled, name)) == (
            type(getattr(plain, name)),
            getattr(plain, name),
        ), name


@pytest.fixture
def world(acme, globex, agent_and_key):
    """Runs of several agents in several states, and what each lookup should and should not reach."""
    make_skill("orders.echo", effect="read", adapter="python:test.echo", publish=True)
    grant(acme, "orders.*")
    agent, key = agent_and_key
    plain = start_run(agent=agent, end_user="u-1", task="open")
    busy = start_run(agent=agent, end_user="u-2", task="has calls and keys")
    ToolCall.objects.create(run=busy, call_id="seen-1", name="orders.echo", idempotency_key="k-1")
    IdempotencyRecord.objects.create(tenant=acme, key="k-1", arguments_sha256="0" * 64, skill_name="orders.echo")
    closed = start_run(agent=agent, end_user="u-3", task="finished")
    Run.objects.filter(pk=closed.pk).update(
        status="failed",
        status_reason="it broke: 'quotes' and \"more\"",
        tainted=True,
        taint_source="web.fetch c9",
        end_user_roles=["customer", "vip"],
        callback_url="https://hooks.example.com/a?b=c",
        finished_at=timezone.now() - timedelta(minutes=3),
    )
    no_trace = start_run(agent=agent, end_user="u-4", task="its trace was purged")
    Trace.objects.filter(run=no_trace).delete()
    rotated, _new_key = rotate_agent_key(agent=create_agent(tenant=acme, name="rotating", role="support")[0], by=None)
    rotated_run = start_run(agent=rotated, end_user="u-5", task="old key in its grace period")
    revoked = create_agent(tenant=acme, name="revoked", role="support")[0]
    revoked_run = start_run(agent=revoked, end_user="u-6", task="its agent was revoked")
    revoke_agent(agent=revoked)
    outsider = create_agent(tenant=globex, name="globex-bot", role="support")[0]
    return {
        "agent": agent,
        "runs": [plain, busy, closed, no_trace],
        "rotated": (rotated, rotated_run),
        "revoked": (revoked, revoked_run),
        "outsider": outsider,
    }


def _both(run_id, lookup: str, call_ids=(), keys=()) -> tuple[Run | None, Run | None]:
    return load_run(run_id, lookup, list(call_ids), list(keys)), plain_orm(run_id, lookup, list(call_ids), list(keys))


@pytest.mark.parametrize(
    ("call_ids", "keys"),
    [([], []), (["seen-1"], []), (["new-1", "seen-1", "new-2"], ["k-1"]), (["new-1"], ["k-2", "k-3"])],
    ids=["nothing_asked", "a_seen_call", "seen_call_and_key", "nothing_seen"],
)
def test_the_compiled_run_query_loads_what_the_plain_orm_loads(world, call_ids, keys):
    lookup = world["agent"].key_lookup
    for run in world["runs"]:
        compiled, plain = _both(run.pk, lookup, call_ids, keys)
        assert compiled is not None
        assert_same_rows(compiled, plain)
    busy = world["runs"][1]
    assert load_run(busy.pk, lookup, call_ids, keys).prior_calls is ("seen-1" in call_ids)
    assert load_run(busy.pk, lookup, call_ids, keys).prior_keys is ("k-1" in keys)


def test_a_rotated_keys_previous_lookup_and_a_revoked_agent_load_alike(world):
    rotated, rotated_run = world["rotated"]
    for lookup in (rotated.key_lookup, rotated.previous_key_lookup):
        compiled, plain = _both(rotated_run.pk, lookup)
        assert compiled is not None and compiled.agent.previous_key_expires_at is not None
        assert_same_rows(compiled, plain)
    revoked, revoked_run = world["revoked"]
    compiled, plain = _both(revoked_run.pk, revoked.key_lookup)
    assert compiled is not None and compiled.agent.is_revoked  # loaded, then refused by the caller
    assert_same_rows(compiled, plain)


def test_neither_reaches_a_run_through_another_agents_key(world):
    """A sibling's key, another tenant's key, a made-up lookup, a missing run: no row from either."""
    run = world["runs"][0]
    rotated, rotated_run = world["rotated"]
    for run_id, lookup in [
        (run.pk, rotated.key_lookup),
        (run.pk, world["outsider"].key_lookup),
        (rotated_run.pk, world["agent"].key_lookup),
        (run.pk, "x" * 12),
        (uuid.uuid4(), world["agent"].key_lookup),
        (run.pk, ""),
    ]:
        assert _both(run_id, lookup) == (None, None)


def test_a_run_moved_to_another_tenant_is_reached_by_neither(world, globex):
    run = world["runs"][0]
    Run.objects.filter(pk=run.pk).update(tenant=globex)
    assert _both(run.pk, world["agent"].key_lookup) == (None, None)
    assert _both(run.pk, world["outsider"].key_lookup) == (None, None)


def test_without_a_gate_generation_row_both_load_none_for_it(world):
    GateGeneration.objects.all().delete()
    compiled, plain = _both(world["runs"][0].pk, world["agent"].key_lookup)
    assert compiled.gate_epoch is None and compiled.gate_number is None
    assert_same_rows(compiled, plain)


def test_hostile_call_ids_and_keys_are_values_not_sql(world):
    """Ids with quotes, commas, braces, backslashes and NUL-free unicode: one array (or JSON) parameter,
    matched exactly, never parsed as SQL or as array syntax."""
    busy = world["runs"][1]
    hostile = ["a', 'seen-1", '{"seen-1"}', "seen-1\\", "seen-1 ", "se%en-1", "sé€n-1", "'); DROP TABLE runs_run; --"]
    compiled, plain = _both(busy.pk, world["agent"].key_lookup, hostile, hostile)
    assert compiled.prior_calls is False and compiled.prior_keys is False
    assert_same_rows(compiled, plain)
    ToolCall.objects.create(run=busy, call_id=hostile[0], name="orders.echo")
    compiled, plain = _both(busy.pk, world["agent"].key_lookup, hostile, [])
    assert compiled.prior_calls is True
    assert_same_rows(compiled, plain)


# PostgreSQL: the server prepares the ORM's text ----------------------------------------------------


def _run_query_statement() -> tuple[str, int] | None:
    """The prepared run query on this connection and how many times it was executed (each execution
    runs a generic or a custom plan); None if it is not prepared. There is never more than one."""
    with connection.cursor() as cursor:
        cursor.execute(
            "SELECT statement, generic_plans + custom_plans FROM pg_prepared_statements "
            "WHERE from_sql = false AND statement LIKE %s",
            ["%prior_calls%"],
        )
        rows = cursor.fetchall()
    assert len(rows) <= 1
    return rows[0] if rows else None


@pytest.mark.postgres
def test_on_postgresql_the_prepared_statement_is_the_orms_text_prepared_once(world, settings):
    settings.AIRLOCK_DB_PREPARED_STATEMENTS = True
    run, lookup = world["runs"][0], world["agent"].key_lookup
    load_run(run.pk, lookup, ["c1"], [])
    sql = RUN_QUERY.sql()
    numbered = iter(range(1, sql.count("%s") + 1))
    prepared, executions = _run_query_statement()
    assert prepared == re.sub("%s", lambda _: f"${next(numbered)}", sql)
    load_run(run.pk, lookup, ["c2"], ["k"])
    assert _run_query_statement() == (prepared, executions + 1)  # the same statement, executed again


@pytest.mark.postgres
def test_with_prepared_statements_off_nothing_is_prepared_and_the_rows_are_the_same(world, settings):
    """Behind a transaction-mode pooler: Django's own cursor, client-side binding, the same text and rows."""
    run, lookup = world["runs"][1], world["agent"].key_lookup
    before = _run_query_statement()
    settings.AIRLOCK_DB_PREPARED_STATEMENTS = False
    compiled, plain = _both(run.pk, lookup, ["seen-1", "x"], ["k-1"])
    assert compiled.prior_calls is True and compiled.prior_keys is True
    assert_same_rows(compiled, plain)
    assert _run_query_statement() == before
