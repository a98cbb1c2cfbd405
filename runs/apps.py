from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self) -> None:
        # Imported here, not at the top: an app's models may only load once the app registry is ready.
        from console import hooks as console_hooks
        from policies import hooks as policies_hooks
        from registry import hooks as registry_hooks
        from runs import incident_spans, lookups, tool_modules, trials
        from runs.plane import mcp_servers
        from traces import hooks as traces_hooks

        tool_modules.load_tools()  # the deployment's own python: functions (and the demo's, in the demo)
        console_hooks.incident_control_applied.connect(incident_spans.mark_open_runs)
        policies_hooks.recorded_calls.connect(lookups.recorded_calls)
        traces_hooks.runs_by_id.connect(lookups.runs_by_id)
        traces_hooks.call_pks.connect(lookups.call_pks)
        registry_hooks.run_skill_tests.connect(trials.run_skill_tests)
        registry_hooks.mcp_server_refusal.connect(mcp_servers.access_refusal)
