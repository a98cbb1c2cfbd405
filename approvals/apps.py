from django.apps import AppConfig


class ApprovalsConfig(AppConfig):
    name = "approvals"

    def ready(self) -> None:
        # Imported here, not at the top: an app's models may only load once the app registry is ready.
        from approvals import services, webhooks
        from runs import hooks

        hooks.open_approval.connect(services.open_approval_request)
        hooks.event_appended.connect(webhooks.schedule_deliveries)
        hooks.event_appended.connect(services.cancel_when_run_closes)
