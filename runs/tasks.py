"""Celery tasks of the runs app: mail that must never be sent inside an agent's request."""

from __future__ import annotations

from celery import shared_task
from django.conf import settings
from django.core.mail import send_mail

from console.tenancy import tenant_admins
from runs.models import ToolCall


@shared_task(
    name="runs.tasks.email_admins_flagged_call",
    ignore_result=True,
    autoretry_for=(OSError,),
    retry_backoff=True,
    max_retries=3,
)
def email_admins_flagged_call(*, call_pk: int, subject: str, body: str) -> int:
    """Mail the tenant's admins about a flagged local call (runs.local_review); the number of addresses."""
    call = ToolCall.objects.select_related("run__tenant").filter(pk=call_pk).first()
    if call is None:
        return 0
    addresses = sorted({user.email for user in tenant_admins(call.run.tenant) if user.email})
    if addresses:
        send_mail(f"[Airlock] {subject}", body, settings.DEFAULT_FROM_EMAIL, addresses, fail_silently=True)
    return len(addresses)
