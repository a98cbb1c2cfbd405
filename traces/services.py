"""Use cases of the traces app: alert rules and their evaluation, retention, forwarding, settings."""

from __future__ import annotations

import logging
from datetime import datetime, timedelta
from typing import Any

import httpx
from django.utils import timezone

from console.models import Tenant
from console.services import set_default_context_budget
from lib import egress
from lib.sealing import seal, unseal
from registry.notifications import email_owning_team, owner_address
from traces import otlp, tasks
from traces.metrics import call_facts, repeats_per_run
from traces.models import Alert, AlertKind, AlertRule, Span, Trace, TraceSettings

UNCHANGED = object()  # an argument left out: the current value stays

logger = logging.getLogger(__name__)


# --- alert rules -------------------------------------------------------------------------------


def create_alert_rule(
    *, skill_name: str, kind: str, threshold: float, window: timedelta, min_calls: int = 10, user: Any = None
) -> AlertRule:
    return AlertRule.objects.create(
        skill_name=skill_name, kind=kind, threshold=threshold, window=window, min_calls=min_calls, created_by=user
    )


def delete_alert_rule(*, rule: AlertRule) -> None:
    rule.delete()


def window_number(rule: AlertRule, now: datetime) -> int:
    """Which window of the rule's length `now` falls in: evaluating twice in one window names the
    same alert (the dedupe key), so beat can run as often as it likes."""
    return int(now.timestamp()) // max(int(rule.window.total_seconds()), 60)


def measure_rule(rule: AlertRule, *, since: datetime, until: datetime) -> tuple[float, str] | None:
    """The rule's value over the window and a message when it fires; None when it does not."""
    facts = call_facts(rule.skill_name, since, until)
    window = _human(rule.window)
    if rule.kind == AlertKind.ERROR_RATE:
        errors = sum(1 for f in facts if f.error_class)
        rate = errors / len(facts) if facts else 0.0
        if len(facts) >= rule.min_calls and rate > rule.threshold:
            return rate, (
                f"{rule.skill_name}: {errors} of {len(facts)} calls failed ({rate:.0%}) in {window}, "
                f"over the {rule.threshold:.0%} threshold"
            )
    elif rule.kind == AlertKind.REPEATED_CALLS:
        worst = max(repeats_per_run(facts), default=0)
        if worst and worst >= rule.threshold:
            return float(worst), (
                f"{rule.skill_name}: one run made {worst} identical calls in {window} (threshold {rule.threshold:g})"
            )
    elif rule.kind == AlertKind.CONTRACT_VIOLATIONS:
        count = sum(1 for f in facts if f.contract_violation)
        if count and count >= rule.threshold:
            return float(count), (
                f"{rule.skill_name}: {count} results violated the output contract in {window} "
                f"(threshold {rule.threshold:g})"
            )
    return None


def _human(window: timedelta) -> str:
    seconds = int(window.total_seconds())
    if seconds % 86400 == 0:
        return f"{seconds // 86400} d"
    if seconds % 3600 == 0:
        return f"{seconds // 3600} h"
    return f"{seconds // 60} min"


def evaluate_alert_rules(*, now: datetime | None = None) -> list[Alert]:
    """Evaluate every enabled rule over its current window; fire each (rule, window) at most once."""
    now = now or timezone.now()
    fired = []
    for rule in AlertRule.objects.filter(enabled=True):
        since, until = now - rule.window, now
        measured = measure_rule(rule, since=since, until=until)
        AlertRule.objects.filter(pk=rule.pk).update(last_evaluated_at=now)
        if measured is None:
            continue
        value, message = measured
        alert, created = Alert.objects.get_or_create(
            dedupe_key=f"{rule.pk}:{window_number(rule, now)}",
            defaults={
                "rule": rule,
                "skill_name": rule.skill_name,
                "value": value,
                "message": message[:500],
                "window_start": since,
                "window_end": until,
                "fired_at": now,
            },
        )
        if created:
            fired.append(alert)
            tasks.email_alert.delay_on_commit(alert.pk)
    return fired


def email_alert(*, alert_id: int) -> bool:
    """Mail the owning team once (claimed with a conditional update)."""
    alert = Alert.objects.filter(pk=alert_id).first()
    if alert is None:
        return False
    if not owner_address(alert.skill_name):
        return False
    claimed = Alert.objects.filter(pk=alert.pk, emailed_at__isnull=True).update(emailed_at=timezone.now())
    if not claimed:
        return False
    body = f"{alert.message}\n\nFired at {alert.fired_at:%Y-%m-%d %H:%M} UTC."
    return email_owning_team(skill_name=alert.skill_name, subject=f"alert on {alert.skill_name}", body=body)


# --- retention ---------------------------------------------------------------------------------


def purge_expired_traces(*, now: datetime | None = None, batch_size: int = 2000, max_batches: int = 50) -> int:
    """Delete traces older than their tenant's retention, spans first, in small separate deletes so
    no statement holds locks for long. Returns the number of traces deleted; call again for more."""
    now = now or timezone.now()
    deleted = 0
    batches = 0
    for tenant in Tenant.objects.only("pk", "trace_retention"):
        cutoff = now - tenant.trace_retention
        while batches < max_batches:
            trace_ids = list(
                Trace.objects.filter(tenant=tenant, started_at__lt=cutoff)
                .order_by("started_at")
                .values_list("pk", flat=True)[:100]
            )
            if not trace_ids:
                break
            while batches < max_batches:
                span_ids = list(Span.objects.filter(trace_id__in=trace_ids).values_list("pk", flat=True)[:batch_size])
                if not span_ids:
                    break
                Span.objects.filter(pk__in=span_ids).delete()
                batches += 1
            if batches >= max_batches:
                break
            deleted += Trace.objects.filter(pk__in=trace_ids).delete()[1].get("traces.Trace", 0)
            batches += 1
    return deleted


# --- settings and forwarding -------------------------------------------------------------------


def trace_settings_for(tenant: Tenant) -> TraceSettings:
    found, _ = TraceSettings.objects.get_or_create(tenant=tenant)
    return found


def update_trace_settings(
    *,
    tenant: Tenant,
    forward_enabled: bool,
    forward_endpoint: str,
    forward_headers: dict[str, str] | None,
    retention: timedelta | None = None,
    context_budget: int | None | object = UNCHANGED,
) -> TraceSettings:
    """Headers (credentials for the collector) are stored sealed; None keeps the current ones.
    `context_budget`: the tenant's default for its runs (None: no budget)."""
    current = trace_settings_for(tenant)
    newly_enabled = forward_enabled and not current.forward_enabled
    current.forward_enabled, current.forward_endpoint = forward_enabled, forward_endpoint
    if forward_headers is not None:
        current.forward_headers_sealed = seal(forward_headers) if forward_headers else ""
    if newly_enabled:
        # forward from now on, not the tenant's whole history
        current.forwarded_up_to = (
            Span.objects.filter(trace__tenant=tenant).order_by("-pk").values_list("pk", flat=True).first() or 0
        )
    current.save()
    if retention is not None:
        Tenant.objects.filter(pk=tenant.pk).update(trace_retention=retention)
    if context_budget is not UNCHANGED:
        set_default_context_budget(tenant=tenant, tokens=context_budget)
    return current


def forward_spans(*, tenant_id: int, batch_size: int = 500, timeout: float = 10.0) -> int:
    """Send spans not yet forwarded to the tenant's OTLP endpoint; advance the cursor only after a 2xx.
    A concurrent second run could resend a batch; OTLP receivers treat duplicates as normal.
    The request goes through the egress guard; the error kept for the settings page names the rule or
    the kind of failure, never the endpoint's own text (which would make the page a port scanner)."""
    current = TraceSettings.objects.select_related("tenant").filter(tenant_id=tenant_id, forward_enabled=True).first()
    if current is None or not current.forward_endpoint:
        return 0
    spans = list(
        Span.objects.filter(trace__tenant_id=tenant_id, pk__gt=current.forwarded_up_to)
        .select_related("trace")
        .order_by("pk")[:batch_size]
    )
    if not spans:
        return 0
    headers = {"Content-Type": "application/x-protobuf"}
    if current.forward_headers_sealed:
        headers.update(unseal(current.forward_headers_sealed))
    body = otlp.encode_spans(spans, tenant_slug=current.tenant.slug)
    try:
        with egress.client(timeout=timeout) as http:
            response = http.post(current.forward_endpoint, content=body, headers=headers)
            response.raise_for_status()
    except egress.EgressRefused as exc:  # not transient: retrying cannot help until the settings change
        TraceSettings.objects.filter(pk=current.pk).update(last_forward_error=str(exc)[:500])
        return 0
    except httpx.HTTPError as exc:
        error = egress.describe_failure(exc, who="the forwarding endpoint")
        TraceSettings.objects.filter(pk=current.pk).update(last_forward_error=error[:500])
        raise
    TraceSettings.objects.filter(pk=current.pk, forwarded_up_to=current.forwarded_up_to).update(
        forwarded_up_to=spans[-1].pk, last_forward_at=timezone.now(), last_forward_error=""
    )
    return len(spans)
