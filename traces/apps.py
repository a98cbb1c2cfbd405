from django.apps import AppConfig


class TracesConfig(AppConfig):
    name = "traces"

    def ready(self) -> None:
        """Answer the registry's question for its rollout view: each version's figures from the traces."""
        from registry import hooks
        from traces.metrics import version_figures

        hooks.version_figures.connect(version_figures)
