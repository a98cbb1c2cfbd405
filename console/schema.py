"""OpenAPI description of Airlock's authentication, for drf-spectacular."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension


class AgentKeyScheme(OpenApiAuthenticationExtension):
    target_class = "console.api_auth.AgentKeyAuthentication"
    name = "agentKey"

    def get_security_definition(self, auto_schema) -> dict:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An agent's API key (ak_...) or an approver's personal access token (pat_...).",
        }


class RevokedAgentKeyScheme(OpenApiAuthenticationExtension):
    target_class = "console.api_auth.RevokedAgentMayReport"
    name = "agentKeyEvenRevoked"

    def get_security_definition(self, auto_schema) -> dict:
        return {
            "type": "http",
            "scheme": "bearer",
            "description": "An agent's API key (ak_...), accepted even after the agent was revoked: only to "
            "upload the calls it decided locally (POST /api/v1/runs/{run_id}/local-calls).",
        }
