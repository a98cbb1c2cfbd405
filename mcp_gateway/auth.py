"""The agent's key on every request to `/mcp`, checked exactly as the REST API checks it."""

from __future__ import annotations

from dataclasses import dataclass

from rest_framework import exceptions

from console.api_auth import AgentKeyAuthentication, TooManyBadKeys
from console.api_errors import error_body
from console.models import Agent
from lib import clock
from runs.authorization import agent_suspended


@dataclass(frozen=True)
class KeyRefusal:
    """What `/mcp` answers instead of serving the request."""

    status: int
    body: dict
    retry_after: int | None = None


class _KeyCarrier:
    """What AgentKeyAuthentication reads of a request: its Authorization header and its address."""

    def __init__(self, authorization: str, remote_addr: str) -> None:
        self.headers = {"authorization": authorization}
        self.META = {"HTTP_AUTHORIZATION": authorization, "REMOTE_ADDR": remote_addr}


def agent_for(*, authorization: str, remote_addr: str) -> Agent | KeyRefusal:
    """The agent whose key this is, or the refusal: 401 for a missing, wrong or revoked key, 403 for a
    person's access token or a suspended agent, 429 once this address or key lookup has sent too many wrong keys."""
    try:
        found = AgentKeyAuthentication().authenticate(_KeyCarrier(authorization, remote_addr))
    except TooManyBadKeys as exc:
        return KeyRefusal(
            429, error_body("rate_limited", "too_many_bad_keys", str(exc.detail), retry_after=exc.wait), exc.wait
        )
    except exceptions.AuthenticationFailed as exc:
        codes = exc.get_codes()
        return KeyRefusal(
            401, error_body("authentication", codes if isinstance(codes, str) else "invalid_key", str(exc.detail))
        )
    if found is None:
        return KeyRefusal(
            401,
            error_body("authentication", "missing_key", "Send the agent's API key as 'Authorization: Bearer <key>'."),
        )
    if not isinstance(found[1], Agent):
        return KeyRefusal(403, error_body("authorization", "agents_only", "Only an agent key may use the MCP server."))
    agent = found[1]
    if agent.is_suspended(clock.now()):  # the key is valid: 403, not 401
        return KeyRefusal(403, {"error": agent_suspended(agent).as_error()})
    return agent
