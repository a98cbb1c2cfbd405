from django.apps import AppConfig

SECTIONS = ["policies.snapshot:grants_section", "policies.snapshot:policies_section"]


class PoliciesConfig(AppConfig):
    name = "policies"

    def ready(self) -> None:
        # Join the registry's pluggable lists without editing the registry's modules.
        from policies.grants import grants_covering
        from registry import review, snapshots

        if grants_covering not in review.GRANT_SOURCES:
            review.GRANT_SOURCES.append(grants_covering)
        for section in SECTIONS:
            if section not in snapshots.SNAPSHOT_SECTIONS:
                snapshots.SNAPSHOT_SECTIONS.append(section)
        try:
            from registry import discovery
        except ImportError:
            return
        filters = getattr(discovery, "DISCOVERY_FILTERS", None)
        if filters is not None and "policies.discovery:granted_only" not in filters:
            filters.append("policies.discovery:granted_only")
