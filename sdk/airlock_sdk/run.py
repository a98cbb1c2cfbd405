"""A run: the batch call, local execution of client skills, and waiting on approvals."""

from __future__ import annotations

import hashlib
import itertools
import logging
import math
import threading
import time
import uuid
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from airlock_sdk.canonical import canonical_json
from airlock_sdk.errors import APIError, ApprovalTimeout, OutcomeUnknown, TransportError, UnknownClientSkill
from airlock_sdk.local import LocalVerdict, unavailable
from airlock_sdk.results import ApprovalRequired, Error, Ok, Result, result_from_dict
from airlock_sdk.webhooks import WebhookVerifier

if TYPE_CHECKING:
    from airlock_sdk.client import Airlock

logger = logging.getLogger("airlock_sdk")

MAX_LONG_POLL = 30
FINAL_DECISIONS = {"declined", "expired", "cancelled"}
MAX_EXPOSED_TOOLS, MAX_TOOL_NAME = 200, 200  # what the batch API keeps of `exposed_tools`


def _unreachable(exc: Exception) -> bool:
    """Connection refused, no answer (timeout), or a 5xx: the gate cannot decide, so the bundle may."""
    if isinstance(exc, TransportError):
        return True
    return isinstance(exc, APIError) and exc.status_code >= 500


def _exposed(names: Iterable[str] | None) -> list[str] | None:
    """The names as the batch API takes them, or None when they do not fit (Airlock then records what the
    agent could call): a refused list would refuse the whole batch."""
    if names is None:
        return None
    names = list(dict.fromkeys(str(name) for name in names))
    if len(names) > MAX_EXPOSED_TOOLS or not all(0 < len(name) <= MAX_TOOL_NAME for name in names):
        return None
    return names


class Run:
    """One agent run. Create it with `Airlock.start_run(...)`; `call`, `wait`, `status`."""

    def __init__(self, airlock: Airlock, data: Mapping[str, Any]) -> None:
        self.airlock = airlock
        self.data = dict(data)
        self.run_id: str = str(data["run_id"])
        self.snapshot: int | None = data.get("snapshot")
        self.trace_id: str = data.get("trace_id", "")
        self.webhook_secret: str | None = data.get("webhook_secret")
        self.run_status: str = data.get("status", "running")
        self.tainted: bool = bool(data.get("tainted", False))
        self.taint_source: str = str(data.get("taint_source") or "")
        self.end_user: str | None = data.get("end_user")  # known when this process started the run
        self.end_user_roles: list[str] = list(data.get("end_user_roles") or [])
        self.cursor: int | None = None
        # The run's context budget (tokens of tool results) as the gate last reported it, and the results it
        # replaced by a summary: call id -> {"summary", "ref"}. Framework integrations put these in place of
        # the full results in the history they hand the model (integrations/turns.py).
        self.context_budget: int | None = data.get("context_budget")
        self.context_used_tokens: int | None = None
        self.context_replaced: dict[str, dict[str, str]] = {}
        self._prefix = uuid.uuid4().hex[:6]
        self._counter = itertools.count(1)
        self._approvals: dict[int, str] = {}  # approval id -> call id
        self._decisions: dict[int, dict] = {}
        self._completed: dict[str, dict] = {}  # call id -> result dict from call.completed
        self._proposed: dict[str, dict] = {}  # call id -> the call as sent (to run approved client skills)
        self._seen: set[Any] = set()
        self._condition = threading.Condition()

    def __repr__(self) -> str:
        return f"<Run {self.run_id} {self.run_status}{' tainted' if self.tainted else ''}>"

    @property
    def path(self) -> str:
        return f"/api/v1/runs/{self.run_id}"

    # calls -------------------------------------------------------------------------------------
    def _normalise(self, call: Mapping[str, Any]) -> dict:
        body = {
            "call_id": str(call.get("call_id") or f"{self._prefix}-{next(self._counter)}"),
            "name": call["name"],
            "arguments": dict(call.get("arguments") or {}),
        }
        for key in ("version", "idempotency_key", "taint", "view", "page"):
            if call.get(key) not in (None, ""):
                body[key] = call[key]
        return body

    def _local_errors(self, call: dict) -> list[dict] | None:
        cache = self.airlock.cache
        if cache is None or cache.snapshot is None or "page" in call:  # a page runs with the first call's arguments
            return None
        # Only a schema we know to be the one the gate will use: the run's pinned snapshot, or an exact version.
        if "version" not in call and cache.snapshot.number != self.snapshot:
            return None
        return cache.validate(call["name"], call["arguments"], call.get("version"))

    def call(self, calls: Iterable[Mapping[str, Any]], *, exposed_tools: Iterable[str] | None = None) -> list[Result]:
        """Send a batch through the gate; one typed result per call, in the order given.

        `exposed_tools`: the tool names the model was shown this turn, recorded with each call for its
        "why" panel (left out when there are more than Airlock keeps: it then records the callable set).

        Arguments that fail the cached schema come back as `Error(error_class="validation",
        local=True)` without a network hop. Client-executed skills the gate allows are run
        here, and their shaped results returned. A batch sent without an answer is resent once
        with the same call ids (the gate replays, never re-executes, a call id it has seen);
        a second silence raises OutcomeUnknown.

        While the gate cannot be reached, an agent whose bundle lets its role decide locally gets each
        call decided here from that signed bundle (or first, with `local_first`), allowed client-executed
        calls spooled and run (docs/sdk.md, "Local decisions").
        """
        prepared = [self._normalise(call) for call in calls]
        results: dict[str, Result] = {}
        to_send = []
        for call in prepared:
            errors = self._local_errors(call)
            if errors:
                results[call["call_id"]] = Error(
                    call_id=call["call_id"],
                    error_class="validation",
                    code="invalid_arguments",
                    local=True,
                    message=f"The arguments do not match {call['name']}'s input schema (checked locally).",
                    fields=errors,
                )
            else:
                to_send.append(call)
        if to_send and self.airlock.local_first:
            to_send = [call for call in to_send if not self._decided_first(call, results)]
        if to_send:
            try:
                response = self._send(to_send, _exposed(exposed_tools))
            except (TransportError, APIError) as exc:
                if not _unreachable(exc) or not self._may_decide_locally():
                    raise
                verdicts = {call["call_id"]: self._decide_locally(call) for call in to_send}
                if isinstance(exc, OutcomeUnknown) and any(v.verdict == "unavailable" for v in verdicts.values()):
                    # The gate may have run its server-side calls: saying "nothing ran" would be a lie.
                    raise
                logger.warning("Airlock is unreachable (%s); deciding %d calls locally", exc, len(to_send))
                for call in to_send:
                    results[call["call_id"]] = self._run_locally(call, verdicts[call["call_id"]])
                return [results[call["call_id"]] for call in prepared]
            self.run_status = response.get("run_status", self.run_status)
            self.tainted = bool(response.get("tainted", self.tainted))
            self._note_context(response.get("context"))
            by_id = {c["call_id"]: c for c in to_send}
            for raw in response.get("results", []):
                results[str(raw.get("call_id"))] = self._finish(raw, by_id.get(str(raw.get("call_id"))))
        return [results[call["call_id"]] for call in prepared]

    # local decisions --------------------------------------------------------------------------
    def _may_decide_locally(self) -> bool:
        """This agent holds a bundle that lets its role decide locally (expired or not: an expired one answers
        `unavailable`). Without one, an outage raises as it always did."""
        bundles = self.airlock.bundles
        bundle = bundles.current() if bundles is not None else None
        return bundle is not None and bundle.body.get("local_decisions") is True

    def _decided_first(self, call: dict, results: dict[str, Result]) -> bool:
        """With `local_first`, a call the bundle decides (allow or deny) is answered here; any other goes to
        the gate."""
        verdict = self._decide_locally(call)
        if verdict.verdict == "unavailable":
            return False
        results[call["call_id"]] = self._run_locally(call, verdict)
        return True

    def _decide_locally(self, call: dict) -> LocalVerdict:
        bundles = self.airlock.bundles
        if self.end_user is None:
            return unavailable("this process did not start the run, so it does not know its end user", retry_after=5)
        taint = call.get("taint")
        if taint and not self.tainted:
            self.tainted = True
            self.taint_source = taint if isinstance(taint, str) else f"agent marked call {call['call_id']}"
        verdict = self.airlock.decider.decide(
            bundles.current() if bundles is not None else None,
            name=call["name"],
            version=call.get("version"),
            arguments=call["arguments"],
            run_tainted=self.tainted,
            taint_source=self.taint_source,
            end_user=self.end_user,
            end_user_roles=self.end_user_roles,
            run_id=self.run_id,
        )
        untrusted = ((verdict.skill or {}).get("manifest") or {}).get("risk", {}).get("untrusted_output")
        if verdict.verdict == "allow" and untrusted and not self.tainted:
            self.tainted = True
            self.taint_source = f"{call['name']} returned untrusted content ({call['call_id']})"
        return verdict

    def _run_locally(self, call: dict, verdict: LocalVerdict) -> Result:
        """Allow: spool the decision (durable), run the function, spool its result. Anything else: the typed
        error, nothing run."""
        call_id = call["call_id"]
        if verdict.verdict != "allow":
            error = verdict.error or {}
            known = {"class", "code", "message", "retry_after", "fields"}
            return Error(
                call_id=call_id,
                error_class=error.get("class", "unavailable"),
                code=error.get("code", ""),
                message=error.get("message", ""),
                retry_after=error.get("retry_after"),
                fields=error.get("fields"),
                details={k: v for k, v in error.items() if k not in known},
                local=True,
                raw={"call_id": call_id, "status": "error", "is_error": True, "error": error, "decided_locally": True},
            )
        skill = verdict.skill or {}
        spool = self.airlock.spool
        spool.record_decision(
            call_id=call_id,
            run_id=self.run_id,
            skill=skill["name"],
            version=skill["version"],
            arguments=call["arguments"],
            verdict="allow",
            reason=verdict.reason,
            bundle_number=verdict.bundle_number,
            decided_at=datetime.now(UTC),
        )
        function = self.airlock.client_skills.get(skill["name"])
        try:
            if function is None:
                raise UnknownClientSkill(f"No local function is registered for client skill {skill['name']!r}.")
            content = function(**call["arguments"])
        except Exception as exc:  # the skill's own failure is its result, spooled like a success
            if function is not None:
                logger.exception("Client skill %s failed", skill["name"])
            error = {"class": "internal", "code": "client_skill_failed", "message": f"{type(exc).__name__}: {exc}"}
            spool.record_result(call_id, status="failed", error=error, finished_at=datetime.now(UTC))
            return Error(
                call_id=call_id,
                error_class="internal",
                code="client_skill_failed",
                message=error["message"],
                local=True,
                raw={"call_id": call_id, "status": "error", "error": error, "decided_locally": True},
            )
        spool.record_result(call_id, status="succeeded", result=content, finished_at=datetime.now(UTC))
        return Ok(
            call_id=call_id,
            content=content,
            skill={"name": skill["name"], "version": skill["version"]},
            executed_locally=True,
            decided_locally=True,
            raw={"call_id": call_id, "status": "ok", "decided_locally": True, "bundle": verdict.bundle_number},
        )

    def _note_context(self, note: Any) -> None:
        if not isinstance(note, Mapping):
            return
        self.context_budget, self.context_used_tokens = note.get("budget"), note.get("used_tokens")
        for entry in note.get("replaced") or []:
            if isinstance(entry, Mapping) and entry.get("call_id") is not None:
                summary = {"summary": str(entry.get("summary", "")), "ref": str(entry.get("ref", ""))}
                self.context_replaced[str(entry["call_id"])] = summary

    def _send(self, calls: list[dict], exposed_tools: list[str] | None = None) -> dict:
        """POST the batch. Sent without an answer, it is resent once with the same call ids: the gate
        keeps each call id of a run once and replays what it recorded (or answers `in_progress`),
        so nothing runs twice. A second silence raises OutcomeUnknown."""
        for attempt in (1, 2):
            try:
                batch: dict[str, Any] = {"calls": calls}
                if exposed_tools is not None:
                    batch["exposed_tools"] = exposed_tools
                return self.airlock.transport.json("POST", f"{self.path}/calls", safe=False, json=batch)
            except TransportError as exc:
                if not exc.sent:
                    raise
                if attempt == 2:
                    raise OutcomeUnknown(
                        f"{exc} Check run.status() before proposing these calls again, and reuse their call ids.",
                        call_ids=[c["call_id"] for c in calls],
                    ) from exc
                logger.warning("No answer to a batch of %d calls; resending it with the same call ids", len(calls))
        raise AssertionError("unreachable")

    # discovery within the run -----------------------------------------------------------------
    def tools(self, format: str = "openai", *, disclosure: str = "full") -> list[dict]:
        """This run's tool definitions, from the snapshot it pinned: the same list for the whole run (less
        skills retired or ungranted since). `disclosure="progressive"`: only find_tools and describe_tool;
        `"both"`: those and every tool."""
        params = {"format": format, "run_id": self.run_id, "disclosure": disclosure}
        data = self.airlock.transport.json("GET", "/api/v1/tools", safe=True, params=params)
        return list(data.get("tools", []))

    def find_tools(
        self,
        query: str,
        *,
        effect: Iterable[str] | None = None,
        data_class: Iterable[str] | None = None,
        namespace: str | None = None,
        limit: int | None = None,
    ) -> Result:
        """Search what this run may call, through the gate like any call (recorded on the trace); an
        `Ok` whose content holds `results`, short summaries best first."""
        arguments: dict[str, Any] = {"query": query}
        for key, value in (("effect", effect), ("data_class", data_class)):
            if value is not None:
                arguments[key] = [value] if isinstance(value, str) else list(value)
        if namespace:
            arguments["namespace"] = namespace
        if limit is not None:
            arguments["limit"] = limit
        return self.call([{"name": "find_tools", "arguments": arguments}])[0]

    def describe_tool(self, name: str, *, format: str = "openai") -> Result:
        """The full definition of one tool find_tools returned, in `format`, through the gate."""
        return self.call([{"name": "describe_tool", "arguments": {"name": name, "format": format}}])[0]

    def next_page(self, result: Ok, *, view: str | None = None) -> Result | None:
        """The next page of a result that has one (`result.next`), through the gate like any call; None
        when it was the last. The page keeps the first call's arguments and view unless `view` names another."""
        if result.next is None:
            return None
        call: dict[str, Any] = {"name": result.skill["name"], "page": result.next}
        if view:
            call["view"] = view
        return self.call([call])[0]

    def _finish(self, raw: dict, call: dict | None) -> Result:
        typed = result_from_dict(raw)
        if isinstance(typed, dict):  # execute_locally
            return self.execute_locally(raw, call)
        if isinstance(typed, ApprovalRequired):
            self._approvals[typed.approval_id] = typed.call_id
            if call is not None:
                self._proposed[typed.call_id] = call
        return typed

    def execute_locally(self, raw: dict, call: dict | None) -> Result:
        """Run a client-executed skill the gate allowed and report its result with the gate's token."""
        skill = raw.get("skill") or {}
        name = skill.get("name") or (call or {}).get("name", "")
        arguments = raw.get("arguments") if raw.get("arguments") is not None else (call or {}).get("arguments", {})
        function = self.airlock.client_skills.get(name)
        report: dict[str, Any] = {"token": raw["token"]}
        expected = raw.get("arguments_sha256")
        if function is None:
            report["error"] = {"message": f"No local function is registered for client skill {name!r}."}
        elif call is None and raw.get("arguments") is None:
            report["error"] = {"message": "This process does not know the call's arguments (was it restarted?)."}
        elif expected and hashlib.sha256(canonical_json(arguments)).hexdigest() != expected:
            report["error"] = {"message": "The arguments differ from the ones the gate allowed; nothing ran."}
        else:
            try:
                report["content"] = function(**arguments)
            except Exception as exc:  # the skill's own failure is its result, reported to the gate
                logger.exception("Client skill %s failed", name)
                report["error"] = {"message": f"{type(exc).__name__}: {exc}"}
        shaped = self.airlock.transport.json(
            "POST", f"{self.path}/calls/{raw['call_id']}/result", safe=True, json=report
        )
        typed = result_from_dict(shaped)
        if isinstance(typed, Ok):
            typed = Ok(
                call_id=typed.call_id,
                content=typed.content,
                skill=typed.skill,
                truncated=typed.truncated,
                warnings=typed.warnings,
                executed_locally=True,
                provenance=typed.provenance,
                raw=typed.raw,
            )
        return typed  # type: ignore[return-value]

    # status and events --------------------------------------------------------------------------
    def status(self) -> dict:
        """What the gate recorded for this run and each call (use it to reconcile after OutcomeUnknown)."""
        data = self.airlock.transport.json("GET", self.path, safe=True)
        self.run_status = data.get("status", self.run_status)
        self.tainted = bool(data.get("tainted", self.tainted))
        return data

    def finish(self, status: str = "completed", reason: str = "") -> dict:
        """Tell Airlock the run is over (completed, failed or cancelled); pending approvals are cancelled.

        `POST /api/v1/runs/{run_id}/finish` is idempotent for the same status, so it is safe to repeat.
        """
        data = self.airlock.transport.json(
            "POST", f"{self.path}/finish", safe=True, json={"status": status, "reason": reason}
        )
        self.run_status = (data or {}).get("status", status)
        return data

    def events(self, *, wait: float = 0) -> list[dict]:
        """New events since the last ones seen; with `wait`, long-polls up to that many seconds (max 30)."""
        wait = max(0, min(math.ceil(wait), MAX_LONG_POLL))
        params: dict[str, Any] = {"wait": wait}
        if self.cursor is not None:
            params["after"] = self.cursor
        data = self.airlock.transport.json("GET", f"{self.path}/events", safe=True, params=params, timeout=wait + 15)
        self.run_status = data.get("run_status", self.run_status)
        events = data.get("events", [])
        for event in events:
            self.handle_event(event)
        if data.get("next_cursor") is not None:
            self.cursor = data["next_cursor"]
        return events

    def handle_event(self, event: Mapping[str, Any]) -> None:
        """Feed one event (from the long poll or a verified webhook) into the run's state."""
        key = event.get("id") if event.get("id") is not None else (event.get("kind"), str(event.get("payload")))
        kind, payload = event.get("kind"), event.get("payload") or {}
        with self._condition:
            if key in self._seen:
                return
            self._seen.add(key)
            if kind == "approval.requested" and payload.get("approval_id") is not None:
                self._approvals[int(payload["approval_id"])] = str(payload.get("call_id"))
            elif kind == "approval.decided" and payload.get("approval_id") is not None:
                self._decisions[int(payload["approval_id"])] = dict(payload)
                if payload.get("call_id"):
                    self._approvals[int(payload["approval_id"])] = str(payload["call_id"])
            elif kind == "call.completed" and payload.get("result"):
                self._completed[str(payload.get("call_id") or payload["result"].get("call_id"))] = payload["result"]
                if payload.get("approval_id") is not None and payload.get("call_id"):
                    self._approvals[int(payload["approval_id"])] = str(payload["call_id"])
            elif kind == "run.status":
                self.run_status = payload.get("status", self.run_status)
            self._condition.notify_all()

    def webhook_verifier(self, **kwargs: Any) -> WebhookVerifier:
        if not self.webhook_secret:
            raise ValueError("This run has no callback URL, so no webhook secret.")
        return WebhookVerifier(self.webhook_secret, **kwargs)

    # waiting on approvals -------------------------------------------------------------------------
    def _outcome(self, approval_id: int, decided_grace_until: float | None) -> Result | None:
        call_id = self._approvals.get(approval_id)
        if call_id and call_id in self._completed:
            return self._finish(self._completed.pop(call_id), self._proposed.get(call_id))
        decision = self._decisions.get(approval_id)
        if (
            decision
            and decision.get("decision") in FINAL_DECISIONS
            and decided_grace_until is not None
            and time.monotonic() > decided_grace_until
        ):
            return Error(
                call_id=call_id or "",
                error_class="declined" if decision["decision"] != "expired" else "expired",
                code=decision["decision"],
                message=f"The approval was {decision['decision']}"
                f"{' by ' + str(decision['decided_by']) if decision.get('decided_by') else ''}; "
                "do not retry.",
                details=decision,
            )
        return None

    def wait(self, approval_id: int | ApprovalRequired, timeout: float = 300, *, poll: bool = True) -> Result:
        """Block until the approval is decided and its outcome delivered; return the call's final result.

        Follows the long-poll events endpoint (and any events fed in by `handle_event`, for
        example from a verified webhook; pass `poll=False` to rely on webhooks alone). An
        approved client-executed skill runs here before `wait` returns.
        """
        if isinstance(approval_id, ApprovalRequired):
            approval_id = approval_id.approval_id
        deadline = time.monotonic() + timeout
        grace: float | None = None
        while True:
            with self._condition:
                if grace is None and approval_id in self._decisions:
                    grace = time.monotonic() + 3  # the outcome follows the decision closely
                outcome = self._outcome(approval_id, grace)
            if outcome is not None:
                return outcome
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise ApprovalTimeout(approval_id, timeout)
            if poll:
                try:
                    self.events(wait=min(remaining, MAX_LONG_POLL, (grace - time.monotonic()) if grace else 99))
                except (TransportError, APIError) as exc:
                    if isinstance(exc, APIError) and exc.status_code < 500:
                        raise
                    logger.warning("Long poll failed (%s); retrying", exc)  # a GET: safe to repeat
                    time.sleep(min(1.0, max(remaining, 0)))
            else:
                with self._condition:
                    self._condition.wait(timeout=min(remaining, 1.0))
