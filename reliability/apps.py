from django.apps import AppConfig


class ReliabilityConfig(AppConfig):
    name = "reliability"
    verbose_name = "Reliability (multi-step work: pipelines, long-running jobs, reconciliation)"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        # Imported here, not at the top: an app's models may only load once the app registry is ready.
        from reliability import jobs, reconcile
        from runs import hooks

        hooks.open_reconciliation.connect(reconcile.open_reconciliation)
        hooks.register_job.connect(jobs.register_job)
        hooks.job_callback_url.connect(jobs.callback_url_for)
