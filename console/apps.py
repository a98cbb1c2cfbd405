from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Console and tenancy"

    def ready(self) -> None:
        from console import checks  # noqa: F401  (registers the system checks)
