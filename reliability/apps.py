from django.apps import AppConfig


class ReliabilityConfig(AppConfig):
    name = "reliability"
    verbose_name = "Reliability"
    default_auto_field = "django.db.models.BigAutoField"
