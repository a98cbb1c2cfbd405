from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self) -> None:
        # Imported here, not at the top: an app's models may only load once the app registry is ready.
        import runs.demo_tools  # noqa: F401 - its @register calls define the python:demo.* functions
        from console import hooks as console_hooks
        from policies import hooks as policies_hooks
        from registry import hooks as registry_hooks
        from runs import incident_spans, lookups, trials
        from traces import hooks as traces_hooks

        console_hooks.incident_control_applied.connect(incident_spans.mark_open_runs)
        policies_hooks.recorded_calls.connect(lookups.recorded_calls)
        traces_hooks.runs_by_id.connect(lookups.runs_by_id)
        traces_hooks.call_pks.connect(lookups.call_pks)
        registry_hooks.run_skill_tests.connect(trials.run_skill_tests)
