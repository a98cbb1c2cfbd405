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

from django.contrib.postgres.search import SearchQuery, SearchRank
from django.db import connection
from django.db.models import F

from console.models import Agent
from lib import signing
from lib.canonical import canonical_json, sha256_of
from lib.sensitivity import mask_secrets
from registry.models import DiscoveryQuery, SkillVersion
from registry.offering import offered_to
from registry.snapshots import SnapshotIndex

# f(agent, entries: list[dict]) -> list[dict] (a subset); policies.apps appends policies.discovery.granted_only.
DISCOVERY_FILTERS: list[Callable[[Agent, list[dict]], list[dict]]] = []

LOW_RESULT_THRESHOLD = 2
MAX_LIMIT = 50
STOP_WORDS = {"a", "an", "the", "to", "of", "for", "and", "or", "in", "on", "by", "with", "my", "me", "i", "is"}


_permitted_cache: OrderedDict[tuple, list[dict]] = OrderedDict()
_permitted_lock = threading.Lock()


def discoverable_entries(agent: Agent, index: SnapshotIndex) -> list[dict]:
    """The newest active version of every skill this agent may discover, by name.

    Cached per (snapshot, agent, filters): a snapshot never changes, and grant changes publish a
    new snapshot. Revoked agents never get here (authentication refuses them).
    """
    key = (
        index.number,
        index.sha256,
        agent.pk,
        agent.key_lookup,
        agent.name,
        agent.role,
        agent.tenant_id,
        tuple(map(id, DISCOVERY_FILTERS)),
    )
    with _permitted_lock:
        if key in _permitted_cache:
            _permitted_cache.move_to_end(key)
            return _permitted_cache[key]
    entries = [
        entry
        for entry in index.current_entries()
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


def _tokens(text: str) -> list[str]:
    words = re.findall(r"[a-z0-9]+", text.lower())
    return [word[:-1] if len(word) > 3 and word.endswith("s") else word for word in words if word not in STOP_WORDS]


_token_index_cache: OrderedDict[tuple, dict[str, dict[int, int]]] = OrderedDict()


def _token_index(index: SnapshotIndex) -> dict[str, dict[int, int]]:
    """token -> {skill_version_id: weight} for a snapshot's current versions; built once per snapshot."""
    key = (index.number, index.sha256)
    with _permitted_lock:
        if key in _token_index_cache:
            return _token_index_cache[key]
    inverted: dict[str, dict[int, int]] = {}
    for entry in index.current_entries():
        version_id = entry["skill_version_id"]
        name_tokens = set(_tokens(entry["name"].replace(".", " ").replace("_", " ")))
        for token in name_tokens | set(_tokens(entry["manifest"].get("description", ""))):
            inverted.setdefault(token, {})[version_id] = 3 * (token in name_tokens) + 1
    with _permitted_lock:
        _token_index_cache[key] = inverted
        while len(_token_index_cache) > 4:
            _token_index_cache.popitem(last=False)
    return inverted


def _rank_python(query: str, entries: list[dict], limit: int, index: SnapshotIndex) -> list[dict]:
    """The SQLite fallback: token overlap, a match in the name weighing more than one in the description."""
    inverted = _token_index(index)
    permitted = {entry["skill_version_id"]: entry for entry in entries}
    scores: dict[int, int] = {}
    for token in set(_tokens(query)):
        for version_id, weight in inverted.get(token, {}).items():
            if version_id in permitted:
                scores[version_id] = scores.get(version_id, 0) + weight
    ranked = sorted(scores.items(), key=lambda item: (-item[1], permitted[item[0]]["name"]))
    return [permitted[version_id] for version_id, _ in ranked[:limit]]


def _rank_postgres(query: str, entries: list[dict], limit: int, index: SnapshotIndex) -> list[dict]:
    """Full-text scores from the GIN-indexed tsvector; unpermitted rows are dropped before ordering.

    ts_rank scores each row on its own, so dropping rows first or after gives the same order;
    passing thousands of permitted ids as an IN list cost more than the search itself.
    """
    by_id = {entry["skill_version_id"]: entry for entry in entries}
    if not by_id:
        return []
    search = SearchQuery(" OR ".join(_tokens(query)) or query, config="english", search_type="websearch")
    scored = (
        SkillVersion.objects.filter(search_vector=search, status="active")
        .annotate(rank=SearchRank(F("search_vector"), search))
        .values_list("pk", "rank")
    )
    permitted = [(rank, pk) for pk, rank in scored if pk in by_id]
    permitted.sort(key=lambda item: (-item[0], item[1]))
    return [by_id[pk] for _, pk in permitted[:limit]]


@dataclass
class SearchResult:
    results: list[dict]
    fallback: str | None


def search_skills(
    *, agent: Agent, index: SnapshotIndex, query: str, namespace: str = "", limit: int = 10
) -> SearchResult:
    """Rank the agent's permitted skills for `query`; on no hit, fall back to the namespace and record the miss."""
    limit = max(1, min(limit, MAX_LIMIT))
    permitted = discoverable_entries(agent, index)
    if namespace:
        permitted = [e for e in permitted if e["namespace"] == namespace or e["namespace"].startswith(namespace + ".")]
    if not query.strip():
        return SearchResult(permitted[:limit], None)
    rank = _rank_postgres if connection.vendor == "postgresql" else _rank_python
    results = rank(query, permitted, limit, index)
    fallback = None
    if not results:
        fallback_namespace = namespace or _namespace_in_query(query, permitted)
        if fallback_namespace:
            results = [e for e in permitted if e["namespace"] == fallback_namespace][:limit]
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
    namespaces = {entry["namespace"] for entry in entries}
    for word in re.findall(r"[a-z0-9_.]+", query.lower()):
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
    key = (
        index.number,
        index.sha256,
        agent.pk,
        agent.key_lookup,
        agent.name,
        agent.role,
        agent.tenant_id,
        tuple(map(id, DISCOVERY_FILTERS)),
    )
    with _permitted_lock:
        if key in _view_cache:
            return _view_cache[key]
    body = {
        "format": index.body.get("format"),
        "number": index.number,
        "created_at": index.body.get("created_at"),
        "source_sha256": index.sha256,
        # Signed, so a runtime refuses a snapshot fetched by another agent or tenant (the SDK
        # compares key_lookup with its own key's and the tenant with the one it knows).
        "audience": {
            "tenant": agent.tenant.slug,
            "agent_id": agent.pk,
            "agent_name": agent.name,
            "key_lookup": agent.key_lookup,
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
