from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit chain"

    def ready(self) -> None:
        from django.db.models.signals import post_delete

        from audit import chain
        from lib import append_only

        append_only.chain_row.connect(chain.append_link)
        # Deletes through the ORM (retention's purge, cascades from a deleted agent, invitation or tenant)
        # leave the row's link as a tombstone; a signal is the one place every such delete passes. Connected
        # per audit log: a receiver for every model would stop Django's fast deletes everywhere else.
        for model in chain.chained_logs():
            post_delete.connect(
                chain.tombstone_deleted_row, sender=model, dispatch_uid=f"audit.tombstone.{model._meta.label}"
            )
