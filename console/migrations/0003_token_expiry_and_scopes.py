"""Personal access tokens expire and carry scopes.

Tokens made before this had neither: they keep the two scopes they had in effect (read, approve)
and expire 30 days after the migration runs, so that no token stays valid forever. Both are filled
as one-off column defaults (no data step, so PostgreSQL can alter the table in the same transaction).
"""

from datetime import timedelta

from django.db import migrations, models
from django.utils import timezone

GRACE = timedelta(days=30)


class Migration(migrations.Migration):

    dependencies = [
        ("console", "0002_invitations"),
    ]

    operations = [
        migrations.AddField(
            model_name="personalaccesstoken",
            name="scopes",
            field=models.JSONField(default=["read", "approve"], help_text="TokenScope values."),
            preserve_default=False,
        ),
        migrations.AlterField(
            model_name="personalaccesstoken",
            name="scopes",
            field=models.JSONField(default=list, help_text="TokenScope values."),
        ),
        migrations.AddField(
            model_name="personalaccesstoken",
            name="expires_at",
            field=models.DateTimeField(default=timezone.now() + GRACE),
            preserve_default=False,
        ),
    ]
