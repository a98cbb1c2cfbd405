from django.apps import AppConfig


class PoliciesConfig(AppConfig):
    name = "policies"

    def ready(self) -> None:
        """Join the registry's lists (it sits below policies and never imports it): grants in a version's
        reach, the grants and policies sections of every snapshot, and the grant check of discovery."""
        # Imported here, not at the top: an app's models may only load once the app registry is ready.
        from policies.discovery import granted_only
        from policies.grants import grants_covering
        from policies.snapshot import grants_section, policies_section
        from registry import discovery, review, snapshots

        for hooks, receiver in [
            (review.GRANT_SOURCES, grants_covering),
            (snapshots.SNAPSHOT_SECTIONS, grants_section),
            (snapshots.SNAPSHOT_SECTIONS, policies_section),
            (discovery.DISCOVERY_FILTERS, granted_only),
        ]:
            if receiver not in hooks:
                hooks.append(receiver)
