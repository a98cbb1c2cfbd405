"""The Airlock client: discovery, runs, and the snapshot cache."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from airlock_sdk.bundles import BundleCache
from airlock_sdk.client_skills import ClientSkillRegistry, default_registry
from airlock_sdk.errors import SnapshotVerificationError, TransportError
from airlock_sdk.local import LocalDecider
from airlock_sdk.run import Run
from airlock_sdk.snapshots import SnapshotCache
from airlock_sdk.spool import Spool
from airlock_sdk.transport import Transport
from airlock_sdk.trust import key_lookup_of
from airlock_sdk.uploader import FlushReport, SpoolUploader

logger = logging.getLogger("airlock_sdk")

FORMATS = ("openai", "anthropic", "mcp")


class ToolList(list):
    """Model-facing tool definitions. `stale` is True when they come from the on-disk cache
    because the control plane could not be reached; `notice` then says so in words."""

    def __init__(
        self, tools: list[dict], *, stale: bool = False, fetched_at: float | None = None, snapshot: int | None = None
    ) -> None:
        super().__init__(tools)
        self.stale = stale
        self.fetched_at = fetched_at or time.time()
        self.snapshot = snapshot
        when = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(self.fetched_at))
        self.notice = (
            f"Airlock is unreachable: these {len(tools)} tool definitions come from the local cache fetched at {when}."
            if stale
            else ""
        )


def tool_name(tool: Mapping[str, Any]) -> str:
    """The model-facing name in any of the three formats."""
    function = tool.get("function")
    return str(function.get("name") if isinstance(function, Mapping) else tool.get("name", ""))


def tool_skill(tool: Mapping[str, Any]) -> str:
    """The Airlock skill behind a definition (formats that forbid dots in names carry it as metadata)."""
    for holder in (tool, tool.get("function") or {}):
        for key in ("x-airlock-skill", "skill", "_airlock"):
            value = holder.get(key) if isinstance(holder, Mapping) else None
            if isinstance(value, str):
                return value
            if isinstance(value, Mapping) and value.get("name"):
                return str(value["name"])
        meta = holder.get("_meta") or holder.get("annotations") if isinstance(holder, Mapping) else None
        if isinstance(meta, Mapping):
            for key in ("airlock/skill", "x-airlock-skill", "skill"):
                if isinstance(meta.get(key), str):
                    return meta[key]
    # OpenAI and Anthropic names turn the skill's dots into "__" (skill names never contain "__").
    return tool_name(tool).replace("__", ".")


def tool_description(tool: Mapping[str, Any]) -> str:
    function = tool.get("function")
    return str((function if isinstance(function, Mapping) else tool).get("description", ""))


class Airlock:
    """Client for one agent key.

    >>> airlock = Airlock("https://airlock.example.com", "ak_...")
    >>> tools = airlock.tools(format="openai")
    >>> run = airlock.start_run(end_user="u-123", task="Refund order 1182")
    >>> results = run.call([{"name": "customer.list_orders", "arguments": {"customer_id": "c-1"}}])
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        retries: int = 2,
        cache_dir: str | Path | None = None,
        use_cache: bool = True,
        public_key_pem: str | None = None,
        tenant: str | None = None,
        trust_dir: str | Path | None = None,
        client_skills: ClientSkillRegistry | None = None,
        http_client: httpx.Client | None = None,
        local_first: bool = False,
        spool_path: str | Path | None = None,
    ) -> None:
        self.transport = Transport(base_url, api_key, timeout=timeout, retries=retries, client=http_client)
        self.client_skills = client_skills or default_registry
        self.cache = (
            SnapshotCache(
                self.transport,
                directory=Path(cache_dir) if cache_dir else None,
                public_key_pem=public_key_pem,
                namespace=api_key[:15],
                key_lookup=key_lookup_of(api_key),
                tenant=tenant,
                trust_dir=Path(trust_dir) if trust_dir else None,
            )
            if use_cache
            else None
        )
        # Local decisions (docs/sdk.md): the signed bundle, the evaluator and the spool. Without the cache
        # there is no pinned key to check a bundle with, so nothing is ever decided locally.
        self.local_first = local_first
        self.bundles = BundleCache(self.cache) if self.cache is not None else None
        self.decider = LocalDecider()
        self._spool_path = Path(spool_path) if spool_path else None
        self._spool: Spool | None = None
        self._uploader: SpoolUploader | None = None
        self.transport.on_answer = self._answered

    def _spool_location(self) -> Path | None:
        if self._spool_path is None and self.cache is None:
            return None
        return self._spool_path or self.cache.directory / f"spool-{self.cache.path.stem[9:]}.sqlite"

    @property
    def spool(self) -> Spool:
        """The spool of calls decided locally (opened on first use, in the cache directory)."""
        if self._spool is None:
            location = self._spool_location()
            if location is None:
                raise RuntimeError("This client was created with use_cache=False and no spool_path.")
            self._spool = Spool(location)
        return self._spool

    @property
    def uploader(self) -> SpoolUploader:
        """What sends the spool to Airlock (airlock_sdk.uploader)."""
        if self._uploader is None:
            self._uploader = SpoolUploader(self.transport, self.spool)
        return self._uploader

    def _has_spool(self) -> bool:
        """A spool is open, or one is on disk (left by an earlier process of this agent)."""
        if self._spool is not None:
            return True
        location = self._spool_location()
        return location is not None and location.exists()

    def _answered(self, *, was_unreachable: bool) -> None:
        if self._uploader is not None or self._has_spool():
            self.uploader.answered(was_unreachable=was_unreachable)

    def flush_spool(self) -> FlushReport:
        """Upload the calls decided locally that Airlock does not have yet (airlock_sdk.uploader); what stays
        pending is sent on the next flush. The client also flushes by itself once Airlock answers again."""
        if not self._has_spool():
            return FlushReport()
        return self.uploader.flush()

    def refresh_bundle(self):
        """Fetch and verify this agent's signed decision bundle (kept on disk as the last good one)."""
        if self.bundles is None:
            raise RuntimeError("This client was created with use_cache=False.")
        return self.bundles.refresh()

    def __enter__(self) -> Airlock:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self.transport.close()
        if self._spool is not None:
            self._spool.close()

    @property
    def base_url(self) -> str:
        return self.transport.base_url

    def client_skill(self, name: str):
        """Decorator registering a local function as the implementation of a `client:` skill."""
        return self.client_skills.skill(name)

    @property
    def snapshot_refusals(self) -> list[SnapshotVerificationError]:
        """The snapshots refused so far (typed: audience, rollback, key change, bad signature), newest last."""
        return list(self.cache.refusals) if self.cache is not None else []

    # discovery -----------------------------------------------------------------------------------
    def refresh_snapshot(self):
        """Fetch and verify the latest signed snapshot (kept on disk as the last known good one)."""
        if self.cache is None:
            raise RuntimeError("This client was created with use_cache=False.")
        return self.cache.refresh()

    def search(self, query: str, *, namespace: str | None = None, limit: int | None = None) -> list[dict]:
        params = {k: v for k, v in {"q": query, "namespace": namespace, "limit": limit}.items() if v is not None}
        data = self.transport.json("GET", "/api/v1/skills/search", safe=True, params=params)
        return list(data.get("results", data) if isinstance(data, dict) else data)

    def tools(self, format: str = "openai", query: str | None = None, limit: int | None = None) -> ToolList:
        """Model-facing definitions of the skills this agent may use, in `format`
        (openai, anthropic or mcp); with `query`, only what discovery ranks for it, best first.
        While Airlock is unreachable, answers from the cache with `stale=True`."""
        if format not in FORMATS:
            raise ValueError(f"format must be one of {', '.join(FORMATS)}")
        try:
            data = self.transport.json("GET", "/api/v1/tools", safe=True, params={"format": format})
            tools = list(data.get("tools", []) if isinstance(data, dict) else data)
            if self.cache is not None:
                self.cache.remember_tools(format, tools)
                self._refresh_quietly()
            if query:
                ranked = [hit.get("name") for hit in self.search(query, limit=limit)]
                by_skill = {tool_skill(tool): tool for tool in tools}
                tools = [by_skill[name] for name in ranked if name in by_skill]
            snapshot = data.get("snapshot") if isinstance(data, dict) else None
            return ToolList(tools[:limit] if limit else tools, snapshot=snapshot)
        except TransportError:
            cached = self.cache.cached_tools(format) if self.cache is not None else None
            if cached is None:
                raise
            tools, fetched_at = cached
            if query:
                words = [w for w in query.lower().split() if w]
                scored = [(sum(w in f"{tool_skill(t)} {tool_description(t)}".lower() for w in words), t) for t in tools]
                tools = [t for score, t in sorted(scored, key=lambda pair: -pair[0]) if score]
            result = ToolList(
                tools[:limit] if limit else tools,
                stale=True,
                fetched_at=fetched_at,
                snapshot=self.cache.snapshot.number if self.cache and self.cache.snapshot else None,
            )
            logger.warning(result.notice)
            return result

    def _refresh_quietly(self) -> None:
        try:
            self.cache.refresh()  # type: ignore[union-attr]
        except Exception as exc:  # discovery still works; local validation just stays off
            logger.warning("Could not refresh the snapshot cache: %s", exc)

    # runs ----------------------------------------------------------------------------------------
    def start_run(
        self,
        end_user: str,
        task: str,
        callback_url: str | None = None,
        *,
        end_user_roles: list[str] | None = None,
        model: str | None = None,
        context_budget: int | None = None,
    ) -> Run:
        """`model`: the model the agent runs (tool results' tokens are counted in its encoding);
        `context_budget`: tokens of tool results the model is given before the oldest are replaced by a
        summary and a ref (`describe_result`); the tenant's default applies when it is left out."""
        body: dict[str, Any] = {"end_user": end_user, "task": task}
        if model:
            body["model"] = model
        if context_budget is not None:
            body["context_budget"] = context_budget
        if callback_url:
            body["callback_url"] = callback_url
        if end_user_roles is not None:
            body["end_user_roles"] = end_user_roles
        # Not retried once sent: a repeat would start a second run.
        data = self.transport.json("POST", "/api/v1/runs", safe=False, json=body)
        run = Run(
            self,
            {
                "context_budget": context_budget,
                **data,
                "end_user": end_user,
                "end_user_roles": list(end_user_roles or []),
            },
        )
        if (
            self.cache is not None
            and run.snapshot is not None
            and (self.cache.snapshot is None or self.cache.snapshot.number < run.snapshot)
        ):
            self._refresh_quietly()
        if self.bundles is not None and (self.bundles.bundle is None or self.bundles.bundle.due_for_refresh()):
            self.bundles.current()
        return run

    def get_run(self, run_id: str) -> Run:
        """Attach to an existing run (for example after a restart) to wait on its approvals."""
        data = self.transport.json("GET", f"/api/v1/runs/{run_id}", safe=True)
        return Run(self, data)
