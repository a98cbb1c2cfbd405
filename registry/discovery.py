"""Permission-first discovery: what an agent may know exists, then ranking within that set only.

The permitted set comes from the latest signed snapshot: active versions whose permissions
name the agent's tenant (or "*") and role (or "*"), narrowed further by every function in
DISCOVERY_FILTERS (the policies app appends its grant check, policies.discovery.granted_only, there
in its AppConfig.ready()). Ranking never sees a skill
outside that set, so a search can never reveal one.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from console.models import Agent
from lib import signing
from lib.canonical import canonical_json, sha256_of
from lib.sensitivity import mask_secrets
from registry.models import DiscoveryQuery
from registry.offering import offered_to
from registry.ranking import RankIndex, terms
from registry.snapshots import SnapshotIndex
from registry.stages import Audience

# f(agent, entries: list[dict]) -> list[dict] (a subset); policies.apps appends policies.discovery.granted_only.
DISCOVERY_FILTERS: list[Callable[[Agent, list[dict]], list[dict]]] = []

LOW_RESULT_THRESHOLD = 2
MAX_LIMIT = 50


_permitted_cache: OrderedDict[tuple, list[dict]] = OrderedDict()
_permitted_lock = threading.Lock()


def _agent_key(agent: Agent, index: SnapshotIndex) -> tuple:
    """What a permitted set depends on: the snapshot, the agent's identity (and the key it presented: the
    signed audience names it), tenant and role, and the filters."""
    return (
        index.number,
        index.sha256,
        agent.pk,
        agent.key_in_use,
        agent.name,
        agent.role,
        agent.tenant_id,
        tuple(map(id, DISCOVERY_FILTERS)),
    )


def discoverable_entries(agent: Agent, index: SnapshotIndex) -> list[dict]:
    """The newest active version of every skill this agent may discover, by name.

    Cached per (snapshot, agent, filters): a snapshot never changes, and grant changes publish a
    new snapshot. Revoked agents never get here (authentication refuses them).
    """
    key = _agent_key(agent, index)
    with _permitted_lock:
        if key in _permitted_cache:
            _permitted_cache.move_to_end(key)
            return _permitted_cache[key]
    entries = [
        entry
        for entry in index.current_entries(Audience(tenant_id=agent.tenant_id))
        if offered_to(entry["manifest"], tenant_slug=agent.tenant.slug, agent_role=agent.role)
    ]
    for source in DISCOVERY_FILTERS:
        entries = list(source(agent, entries))
    entries.sort(key=lambda entry: entry["name"])
    with _permitted_lock:
        _permitted_cache[key] = entries
        while len(_permitted_cache) > 512:
            _permitted_cache.popitem(last=False)
    return entries


_rank_index_cache: OrderedDict[tuple, RankIndex] = OrderedDict()


def _rank_index(agent: Agent, index: SnapshotIndex, permitted: list[dict]) -> RankIndex:
    """The ranking index of this agent's permitted set: built from that set only, once per snapshot and agent."""
    key = _agent_key(agent, index)
    with _permitted_lock:
        if key in _rank_index_cache:
            _rank_index_cache.move_to_end(key)
            return _rank_index_cache[key]
    built = RankIndex.build(permitted)
    with _permitted_lock:
        _rank_index_cache[key] = built
        while len(_rank_index_cache) > 64:
            _rank_index_cache.popitem(last=False)
    return built


@dataclass
class SearchResult:
    results: list[dict]
    fallback: str | None


@dataclass(frozen=True)
class SearchFilters:
    """Narrowing a search to some effect classes and data classes (empty: any)."""

    effects: frozenset[str] = frozenset()
    data_classes: frozenset[str] = frozenset()
    names: frozenset[str] | None = None  # only these skills (what a run may still call); None: any

    @property
    def narrows(self) -> bool:
        return bool(self.effects or self.data_classes) or self.names is not None

    def admits(self, entry: dict) -> bool:
        return (
            (not self.effects or entry["effect"] in self.effects)
            and (not self.data_classes or entry["data_classification"] in self.data_classes)
            and (self.names is None or entry["name"] in self.names)
        )


def _in_namespace(entry: dict, namespace: str) -> bool:
    return entry["namespace"] == namespace or entry["namespace"].startswith(namespace + ".")


def search_skills(
    *,
    agent: Agent,
    index: SnapshotIndex,
    query: str,
    namespace: str = "",
    limit: int = 10,
    filters: SearchFilters | None = None,
) -> SearchResult:
    """Rank the agent's permitted skills for `query`; on no hit, fall back to the namespace and record the miss.

    Filters and the namespace only narrow the permitted set; they never widen it.
    """
    limit = max(1, min(limit, MAX_LIMIT))
    filters = filters or SearchFilters()
    permitted = discoverable_entries(agent, index)
    allowed = None  # every permitted entry; a set of positions when filters or a namespace narrow it
    if namespace or filters.narrows:
        allowed = {
            position
            for position, entry in enumerate(permitted)
            if filters.admits(entry) and (not namespace or _in_namespace(entry, namespace))
        }
    if not query.strip():
        listed = permitted if allowed is None else [e for p, e in enumerate(permitted) if p in allowed]
        return SearchResult(listed[:limit], None)
    results = _rank_index(agent, index, permitted).rank(query, allowed=allowed, limit=limit)
    fallback = None
    if not results:
        fallback_namespace = namespace or _namespace_in_query(query, permitted)
        if fallback_namespace:
            results = [
                entry
                for position, entry in enumerate(permitted)
                if (allowed is None or position in allowed) and entry["namespace"] == fallback_namespace
            ][:limit]
            fallback = "namespace"
    if len(results) <= LOW_RESULT_THRESHOLD or fallback:
        DiscoveryQuery.objects.create(
            query=mask_secrets(query)[:300],  # owners of every tenant read these: mask secrets first
            namespace=namespace[:100],
            result_count=0 if fallback else len(results),
            fell_back_to_namespace=bool(fallback),
            agent=agent,
        )
    return SearchResult(results, fallback)


def _namespace_in_query(query: str, entries: list[dict]) -> str:
    """The namespace a short query names ("billing stuff"): browsing, not a task the ranker missed."""
    words = re.findall(r"[a-z0-9_.]+", query.lower())
    if len(terms(query)) > 2:
        return ""
    namespaces = {entry["namespace"] for entry in entries}
    for word in words:
        for candidate in (word, word.rstrip("s")):
            if candidate in namespaces:
                return candidate
    return ""


def summary(entry: dict) -> dict:
    risk = entry["manifest"].get("risk", {})
    return {
        "name": entry["name"],
        "namespace": entry["namespace"],
        "version": entry["version"],
        "description": entry["manifest"].get("description", ""),
        "effect": entry["effect"],
        "data_classification": entry["data_classification"],
        "approval": risk.get("approval"),
        "untrusted_output": bool(risk.get("untrusted_output")),
    }


@dataclass(frozen=True)
class AgentSnapshot:
    """The part of a snapshot one agent may discover, signed on its own so the agent can verify it."""

    body: dict
    sha256: str
    signature: str
    key_id: str

    @property
    def etag(self) -> str:
        return f'"{self.body["number"]}-{self.sha256[:32]}"'


_view_cache: OrderedDict[tuple, AgentSnapshot] = OrderedDict()


def agent_snapshot(agent: Agent, index: SnapshotIndex) -> AgentSnapshot:
    key = _agent_key(agent, index)
    with _permitted_lock:
        if key in _view_cache:
            return _view_cache[key]
    body = {
        "format": index.body.get("format"),
        "number": index.number,
        "created_at": index.body.get("created_at"),
        "source_sha256": index.sha256,
        # Signed, so a runtime refuses a snapshot fetched by another agent or tenant (the SDK
        # compares key_lookup with its own key's and the tenant with the one it knows). The key is the one
        # this request came with: during a rotation's grace period the old key's holder gets its own.
        "audience": {
            "tenant": agent.tenant.slug,
            "agent_id": agent.pk,
            "agent_name": agent.name,
            "key_lookup": agent.key_in_use,
            "agent_role": agent.role,
        },
        "skills": discoverable_entries(agent, index),
    }
    view = AgentSnapshot(
        body=body, sha256=sha256_of(body), signature=signing.sign(canonical_json(body)), key_id=signing.key_id()
    )
    with _permitted_lock:
        _view_cache[key] = view
        while len(_view_cache) > 512:
            _view_cache.popitem(last=False)
    return view
