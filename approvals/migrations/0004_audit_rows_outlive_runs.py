"""Audit rows outlive their run: kept fields (tenant, approval, run, call, skill), request SET_NULL,
and `redacted_at` for approvals.retention. Existing rows get the kept fields from their request."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def fill_kept_fields(apps, schema_editor):
    ApprovalEvent = apps.get_model("approvals", "ApprovalEvent")
    ApprovalRequest = apps.get_model("approvals", "ApprovalRequest")
    requests = ApprovalRequest.objects.filter(events__isnull=False).distinct().select_related("call")
    for request in requests.iterator(chunk_size=500):
        ApprovalEvent.objects.filter(request_id=request.pk).update(
            tenant_id=request.tenant_id, approval_ref=request.pk, run_ref=request.call.run_id,
            call_ref=request.call.call_id, skill_name=request.skill_name, skill_version=request.skill_version)


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0003_votes_deliveries_and_request_fields'),
        ('console', '0001_initial'),
        ('runs', '0001_initial'),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(
            model_name='approvalevent',
            name='approval_ref',
            field=models.PositiveBigIntegerField(blank=True, db_index=True, help_text="The approval request's id, kept after it is deleted.", null=True),
        ),
        migrations.AddField(
            model_name='approvalevent',
            name='call_ref',
            field=models.CharField(blank=True, help_text="The agent's call id in the run.", max_length=200),
        ),
        migrations.AddField(
            model_name='approvalevent',
            name='redacted_at',
            field=models.DateTimeField(blank=True, help_text='When retention redacted the detail.', null=True),
        ),
        migrations.AddField(
            model_name='approvalevent',
            name='run_ref',
            field=models.UUIDField(blank=True, help_text="The run's id, kept after it is deleted.", null=True),
        ),
        migrations.AddField(
            model_name='approvalevent',
            name='skill_name',
            field=models.CharField(blank=True, max_length=200),
        ),
        migrations.AddField(
            model_name='approvalevent',
            name='skill_version',
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.AddField(
            model_name='approvalevent',
            name='tenant',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='+', to='console.tenant'),
        ),
        migrations.AlterField(
            model_name='approvalevent',
            name='request',
            field=models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name='events', to='approvals.approvalrequest'),
        ),
        migrations.AddIndex(
            model_name='approvalevent',
            index=models.Index(condition=models.Q(('request__isnull', True)), fields=['created_at'], name='detached_audit_created_idx'),
        ),
        # Last: on PostgreSQL, altering a table after updating its foreign-key columns in the same
        # transaction fails with "pending trigger events".
        migrations.RunPython(fill_kept_fields, migrations.RunPython.noop),
    ]
