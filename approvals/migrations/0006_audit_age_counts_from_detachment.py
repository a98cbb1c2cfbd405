"""An audit row's retention period counts from when it outlived its request (`detached_at`), not from
when it was written. Rows detached before this migration were redacted in the same transaction that
detached them, so their `redacted_at` is that moment; a detached row not yet redacted gets its
`detached_at` when the next retention pass redacts it."""

from django.db import migrations, models
from django.db.models import F


def detached_when_redacted(apps, schema_editor):
    ApprovalEvent = apps.get_model("approvals", "ApprovalEvent")
    ApprovalEvent.objects.filter(request__isnull=True, redacted_at__isnull=False, detached_at__isnull=True).update(
        detached_at=F("redacted_at")
    )


class Migration(migrations.Migration):

    dependencies = [
        ('approvals', '0005_approver_notifications'),
    ]

    operations = [
        migrations.RemoveIndex(
            model_name='approvalevent',
            name='detached_audit_created_idx',
        ),
        migrations.AddField(
            model_name='approvalevent',
            name='detached_at',
            field=models.DateTimeField(blank=True, help_text='When the row outlived its request; its audit period counts from here.', null=True),
        ),
        migrations.AddIndex(
            model_name='approvalevent',
            index=models.Index(condition=models.Q(('request__isnull', True)), fields=['detached_at'], name='detached_audit_detached_idx'),
        ),
        # Last: on PostgreSQL, altering a table after updating it in the same transaction fails with
        # "pending trigger events".
        migrations.RunPython(detached_when_redacted, migrations.RunPython.noop),
    ]
