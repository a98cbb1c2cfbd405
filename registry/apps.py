from django.apps import AppConfig


class RegistryConfig(AppConfig):
    name = "registry"

    def ready(self) -> None:
        from registry import rollouts, snapshots

        if rollouts.rollouts_section not in snapshots.SNAPSHOT_SECTIONS:
            snapshots.SNAPSHOT_SECTIONS.append(rollouts.rollouts_section)
