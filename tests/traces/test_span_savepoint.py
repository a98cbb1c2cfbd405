"""A span that cannot be stored never breaks its caller: it fails in its own savepoint."""

import pytest
from django.db import transaction

from runs.models import Run
from tests.runs.factories import run_for
from traces.models import Span
from traces.recording import record_span_safely

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_failing_span_inside_an_open_transaction_leaves_the_callers_work_intact(agent):
    run = run_for(agent)
    with transaction.atomic():
        Run.objects.filter(pk=run.pk).update(status_reason="the caller's own write")
        # PostgreSQL refuses \u0000 in jsonb (the transaction would be aborted without a savepoint);
        # a run that does not exist fails the trace lookup on any database.
        record_span_safely(
            what="a hostile span",
            run=run,
            kind="other",
            name="x",
            attributes={"nul": "a\x00b"},
            started_at=run.created_at,
            ended_at=run.created_at,
        )
        ghost = Run(pk="00000000-0000-0000-0000-000000000000", tenant_id=run.tenant_id, agent_id=run.agent_id)
        assert (
            record_span_safely(
                what="a span of no run",
                run=ghost,
                kind="other",
                name="y",
                started_at=run.created_at,
                ended_at=run.created_at,
            )
            is None
        )
        assert Run.objects.filter(pk=run.pk).count() == 1  # the connection is still usable here
    run.refresh_from_db()
    assert run.status_reason == "the caller's own write"
    assert not Span.objects.filter(name="y").exists()
