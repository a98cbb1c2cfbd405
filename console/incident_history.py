"""An agent's suspension and its tenant's freeze as they stood at a past moment.

The rows hold only the present (`Agent.suspended_at`, `Tenant.frozen_at`); the incident log
(`OperatorAction`, append-only) holds every suspension, resumption, freeze and unfreeze with who and why.
`IncidentHistory.of(agent)` reads the agent's and its tenant's part of the log once; `agent_at(at)` and
`tenant_at(at)` then give copies of the rows with those fields as they stood at `at`, which the usual model
methods (`Agent.is_suspended`, `suspension_notice`, `Tenant.is_frozen`) read. An upload of calls an agent
decided locally is judged with them (runs.local_review): a call decided while the agent was suspended, or
while its tenant was frozen, is flagged even if the suspension or the freeze was lifted before the upload.
"""

from __future__ import annotations

from copy import copy
from dataclasses import dataclass
from datetime import datetime

from django.db.models import Q
from django.utils.dateparse import parse_datetime

from console.models import Agent, OperatorAction, Tenant

Action = OperatorAction.Action
AGENT_ACTIONS = (Action.AGENT_SUSPENDED, Action.AGENT_RESUMED)
TENANT_ACTIONS = (Action.TENANT_FROZEN, Action.TENANT_UNFROZEN)


@dataclass(frozen=True)
class IncidentHistory:
    agent: Agent
    tenant: Tenant
    actions: tuple[OperatorAction, ...]  # the agent's suspensions and the tenant's freezes, newest first

    @classmethod
    def of(cls, agent: Agent) -> IncidentHistory:
        """One query: the suspensions of this agent (its log rows name it) and the freezes of its tenant."""
        actions = OperatorAction.objects.filter(
            Q(action__in=TENANT_ACTIONS) | Q(action__in=AGENT_ACTIONS, target=agent.name), tenant_id=agent.tenant_id
        ).order_by("-created_at", "-pk")
        return cls(agent=agent, tenant=agent.tenant, actions=tuple(actions))

    def _last(self, kinds: tuple[str, ...], at: datetime) -> OperatorAction | None:
        return next((a for a in self.actions if a.action in kinds and a.created_at <= at), None)

    def agent_at(self, at: datetime) -> Agent:
        """The agent with its suspension as it stood at `at` (revocation is its row's own `revoked_at`)."""
        held = copy(self.agent)
        if held.suspended_at is not None and held.suspended_at <= at:
            return held  # the current suspension had begun: the row says it all (`is_suspended` checks its end)
        last = self._last(AGENT_ACTIONS, at)
        if last is None or last.action == Action.AGENT_RESUMED:
            held.suspended_at = held.suspended_until = None
            held.suspended_by_label = held.suspend_reason = ""
            return held
        until = last.detail.get("until")
        held.suspended_at, held.suspended_until = last.created_at, parse_datetime(until) if until else None
        held.suspended_by_label, held.suspend_reason = last.actor_label, last.reason
        return held

    def tenant_at(self, at: datetime) -> Tenant:
        """The tenant with its freeze as it stood at `at`."""
        held = copy(self.tenant)
        if held.frozen_at is not None and held.frozen_at <= at:
            return held
        last = self._last(TENANT_ACTIONS, at)
        if last is None or last.action == Action.TENANT_UNFROZEN:
            held.frozen_at, held.frozen_by_label, held.freeze_reason = None, "", ""
            return held
        held.frozen_at, held.frozen_by_label, held.freeze_reason = last.created_at, last.actor_label, last.reason
        return held


__all__ = ["IncidentHistory"]
