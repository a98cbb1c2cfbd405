from django.apps import AppConfig


class ConsoleConfig(AppConfig):
    name = "console"
    verbose_name = "Console and tenancy"

    def ready(self) -> None:
        from console import checks, schema  # noqa: F401  (register system checks and the OpenAPI auth scheme)
