from django.apps import AppConfig


class RetentionConfig(AppConfig):
    """Retention of runs and everything they own; above runs, approvals and reliability, which it deletes from."""

    name = "retention"
    verbose_name = "Retention"
    default_auto_field = "django.db.models.BigAutoField"
