from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("console", "0003_token_expiry_and_scopes")]

    operations = [
        migrations.CreateModel(
            name="GateGeneration",
            fields=[
                ("id", models.PositiveSmallIntegerField(default=1, primary_key=True, serialize=False)),
                ("epoch", models.CharField(max_length=36)),
                ("number", models.BigIntegerField(default=1)),
            ],
        ),
    ]
