from django.apps import AppConfig


class AirlockConfig(AppConfig):
    name = "airlock"
    verbose_name = "Airlock (project shell)"
