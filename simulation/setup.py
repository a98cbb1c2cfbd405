"""What the simulator needs in the local database: its agents (with fresh keys) and its own skills.

Agent keys are shown only once, so when the simulator runs as a manage.py command against the
local database it rotates the keys of its own agents (sim-support, sim-docs, sim-ops in tenant
acme) at every start and keeps them in memory only. Its unreliable skills (`inventory.*`,
`shipping.*`, backed by `simulation.downstream`) and a client-executed skill are published
by the platform superuser and granted to the simulator's roles.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction

from console.models import Agent, Team, Tenant
from console.services import create_agent
from policies.models import Grant
from policies.services import create_grant
from registry.models import Skill, VersionStatus
from registry.namespaces import assign_namespace, namespace_of, owning_claim
from registry.services import create_draft_version, latest_published, publish_as_operator

logger = logging.getLogger(__name__)

TENANT = "acme"
TEAM = "developer-platform"
AGENTS = {"support": ("sim-support", "support"), "docs": ("sim-docs", "developer"), "ops": ("sim-ops", "support")}


@dataclass
class SimAgent:
    name: str
    role: str
    key: str


def ensure_agents(tenant_slug: str = TENANT) -> dict[str, SimAgent]:
    """Create the simulator's agents, or give them new keys; returns {scenario: SimAgent}."""
    tenant = Tenant.objects.get(slug=tenant_slug)
    agents: dict[str, SimAgent] = {}
    for scenario, (name, role) in AGENTS.items():
        agent = Agent.objects.filter(tenant=tenant, name=name).first()
        if agent is None:
            agent, key = create_agent(tenant=tenant, name=name, role=role)
        else:
            key = agent.issue_key()  # rotation: the old key stops working now
            agent.revoked_at = None
            agent.save(update_fields=["key_lookup", "key_hash", "revoked_at"])
        agents[scenario] = SimAgent(name=name, role=agent.role, key=key)
    return agents


def _manifest(
    *,
    skill_id: str,
    name: str,
    version: str,
    description: str,
    input_schema: dict,
    output_schema: dict,
    effect: str,
    adapter: str,
    timeout_ms: int = 2000,
    idempotent: bool = False,
) -> dict:
    return {
        "skill_id": skill_id,
        "name": name,
        "version": version,
        "description": description,
        "input_schema": {"type": "object", "additionalProperties": False, **input_schema},
        "output_schema": {"type": "object", **output_schema},
        "risk": {"effect": effect, "data_classification": "internal", "approval": "not_required"},
        "permissions": {"allowed_agent_roles": ["support", "developer"], "allowed_tenants": ["*"]},
        "execution": {
            "adapter": adapter,
            "timeout_ms": timeout_ms,
            "max_attempts": 1,
            "result_limit_bytes": 16384,
            "idempotent": idempotent,
        },
        "ownership": {"team": TEAM, "support_tier": "P3"},
    }


def sim_manifests(downstream: str) -> list[dict]:
    string = {"type": "string", "minLength": 1, "maxLength": 64}
    return [
        _manifest(
            skill_id="skl_sim_check_stock",
            name="inventory.check_stock",
            version="1.0.0",
            effect="read",
            description="Look up how many units of one SKU are in stock. Read only, no side effects. The "
            "inventory service is flaky: a transient error is safe to retry.",
            input_schema={"properties": {"sku": string}, "required": ["sku"]},
            output_schema={"properties": {"sku": {"type": "string"}, "in_stock": {"type": "integer"}}},
            adapter=f"{downstream}/check_stock",
        ),
        _manifest(
            skill_id="skl_sim_quote_rates",
            name="shipping.quote_rates",
            version="1.0.0",
            effect="read",
            description="Get courier price quotes for a destination country. Read only. The carrier API "
            "allows one request a second and answers rate_limited with retry_after otherwise.",
            input_schema={
                "properties": {"destination": {"type": "string", "pattern": "^[A-Z]{2}$"}},
                "required": ["destination"],
            },
            output_schema={"properties": {"quotes": {"type": "array"}}},
            adapter=f"{downstream}/quote_rates",
        ),
        _manifest(
            skill_id="skl_sim_book_courier",
            name="shipping.book_courier",
            version="1.0.0",
            effect="write",
            description="Book a courier pickup for one order on a date. Side effect: a booking with the "
            "carrier. Idempotent by key; a timeout leaves the outcome unknown until repeated "
            "with the same idempotency key.",
            input_schema={
                "properties": {"order_id": string, "pickup_date": {"type": "string", "format": "date"}},
                "required": ["order_id", "pickup_date"],
            },
            output_schema={"properties": {"booking_id": {"type": "string"}, "status": {"type": "string"}}},
            adapter=f"{downstream}/book_courier",
            timeout_ms=800,
            idempotent=True,
        ),
        _manifest(
            skill_id="skl_sim_workspace_notes",
            name="workspace.read_local_notes",
            version="1.0.0",
            effect="read",
            description="Read the agent's own local notes about a customer, kept on the agent's machine. "
            "Read only; executed by the agent itself (client-executed), never by Airlock.",
            input_schema={"properties": {"customer_id": string}, "required": ["customer_id"]},
            output_schema={"properties": {"notes": {"type": "array", "items": {"type": "string"}}}},
            adapter="client:workspace.read_local_notes",
        ),
    ]


def _bump(version: str) -> str:
    major, minor, patch = (int(part) for part in version.split("."))
    return f"{major}.{minor}.{patch + 1}"


def ensure_skills(downstream: str) -> list[str]:
    """Publish the simulator's skills (a new patch version when the downstream URL changed) and grant them."""
    root = get_user_model().objects.filter(is_superuser=True).order_by("pk").first()
    if root is None or not Team.objects.filter(slug=TEAM).exists():
        logger.warning("No superuser or no %s team: run seed_demo first; the simulator's own skills are skipped.", TEAM)
        return []
    published = []
    for manifest in sim_manifests(downstream):
        namespace = namespace_of(manifest["name"])
        if owning_claim(namespace) is None:  # as a platform admin would assign it to the simulator's team
            assign_namespace(namespace=namespace, team=Team.objects.get(slug=TEAM))
        with transaction.atomic():
            skill = Skill.objects.filter(name=manifest["name"]).first()
            current = latest_published(skill) if skill else None
            if (
                current is not None
                and current.manifest.get("execution") == manifest["execution"]
                and current.status == VersionStatus.ACTIVE
            ):
                continue
            if current is not None:
                manifest["version"] = _bump(current.version)
            draft = create_draft_version(manifest=manifest, author=root, skill=skill)
            # An operator's command: its own downstream on this host, published without a second person.
            publish_as_operator(version=draft, command="simulate_agents")
            published.append(f"{manifest['name']}@{manifest['version']}")
    tenant = Tenant.objects.get(slug=TENANT)
    for pattern, role in [
        ("inventory.*", "support"),
        ("shipping.*", "support"),
        ("workspace.*", "support"),
        ("workspace.*", "developer"),
    ]:
        if not Grant.objects.active().filter(tenant=tenant, skill_pattern=pattern, agent_role=role).exists():
            create_grant(tenant=tenant, skill_pattern=pattern, agent_role=role, granted_by=root)
    return published
