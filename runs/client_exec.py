"""The gate side of client-executed skills (adapter `client:`).

When the gate allows such a call it does not execute anything: it answers `execute_locally`
with a short-lived token bound to the run, the call and the hash of the exact arguments. The
agent's SDK runs its own function and posts the result with the token
(`POST /api/v1/runs/{run_id}/calls/{call_id}/result`); here the token is checked, the result
cleaned, shaped and recorded like any other (with its provenance when it is marked untrusted), and a
`call.completed` event appended.

Tokens are stateless: `<base64url claims>.<hex HMAC-SHA256(SECRET_KEY, claims)>`.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from datetime import UTC, datetime
from typing import Any

from airlock_sdk import fencing
from airlock_sdk.policy.context import CLIENT_SCHEME, is_client_skill
from airlock_sdk.policy.kernel import Path
from django.conf import settings
from django.db import transaction
from django.utils import timezone

from lib.canonical import sha256_of
from lib.sealing import seal, unseal
from runs import lifecycle, result_facts
from runs.authorization import recorded_call_refusal
from runs.errors import CallError, NotPermitted, ValidationFailed
from runs.events import append_event
from runs.execution import timeout_of
from runs.models import CallStatus, Run, ToolCall
from runs.shaping import shape
from traces.recording import record_span_safely
from traces.redaction import redact_text

logger = logging.getLogger(__name__)

SCHEME = CLIENT_SCHEME
TOKEN_TTL_SECONDS = 300
RESULT_HASH_KEY = "client_result_sha256"


class TokenExpired(CallError):
    error_class, code = "expired", "token_expired"


class AlreadyReported(CallError):
    error_class, code = "conflict", "already_reported"


def _key() -> bytes:
    return hashlib.sha256(f"airlock-client-token:{settings.SECRET_KEY}".encode()).digest()


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def make_token(*, run_id: str, call_id: str, arguments_sha256: str, expires_at: int) -> str:
    claims = _b64(
        json.dumps({"r": run_id, "c": call_id, "h": arguments_sha256, "e": expires_at}, separators=(",", ":")).encode()
    )
    return f"{claims}.{hmac.new(_key(), claims.encode(), hashlib.sha256).hexdigest()}"


def read_token(token: str, *, call: ToolCall, now: float | None = None) -> dict:
    """The token's claims, if it is genuine, unexpired and issued for exactly this run and call."""
    claims_b64, _, mac = str(token).partition(".")
    expected = hmac.new(_key(), claims_b64.encode(), hashlib.sha256).hexdigest()
    if not mac or not hmac.compare_digest(mac, expected):
        raise NotPermitted("The result token is not valid for this deployment.", code="invalid_token")
    claims = json.loads(base64.urlsafe_b64decode(claims_b64 + "=" * (-len(claims_b64) % 4)))
    if claims.get("r") != str(call.run_id) or claims.get("c") != call.call_id:
        raise NotPermitted("The result token was issued for another call.", code="token_mismatch")
    if claims.get("e", 0) < (now or time.time()):
        raise TokenExpired("The result token has expired; the call was not recorded. Propose the call again.")
    return claims


def _skill_of(call: ToolCall) -> dict:
    version = call.skill_version.version if call.skill_version_id else call.requested_version
    return {"name": call.name, "version": version}


def lease_seconds(manifest: dict) -> float:
    """How long an executing call is held: a client-run call for as long as its token lives."""
    return TOKEN_TTL_SECONDS if is_client_skill(manifest) else timeout_of(manifest)


def issue_client_token(*, call: ToolCall, arguments: Any = None) -> dict:
    """The `execute_locally` result for a call its caller already claimed (`executing`, runs.lifecycle).

    `arguments` are the ones to run when they differ from the proposal (an approver edited them);
    they are then included in the result, since the agent cannot know them otherwise.
    """
    arguments_sha256 = sha256_of(arguments) if arguments is not None else call.arguments_sha256
    expires_at = int(time.time()) + TOKEN_TTL_SECONDS
    token = make_token(
        run_id=str(call.run_id), call_id=call.call_id, arguments_sha256=arguments_sha256, expires_at=expires_at
    )
    result: dict[str, Any] = {
        "call_id": call.call_id,
        "status": "execute_locally",
        "is_error": False,
        "token": token,
        "expires_at": datetime.fromtimestamp(expires_at, UTC).isoformat(),
        "skill": _skill_of(call),
        "arguments_sha256": arguments_sha256,
    }
    if arguments is not None and arguments_sha256 != call.arguments_sha256:
        result["arguments"] = arguments
    if arguments is not None:  # kept sealed until the result arrives: the policy is checked again on them
        ToolCall.objects.filter(pk=call.pk).update(sealed_arguments=seal(arguments))
    return result


def _manifest(call: ToolCall) -> dict:
    return (call.skill_version.manifest if call.skill_version_id else None) or {}


def _record_span(
    *, call: ToolCall, result: dict, started_at: datetime, finished_at: datetime, refused: CallError | None = None
) -> None:
    attributes: dict[str, Any] = {
        "airlock.execution": "client",
        "airlock.result.bytes": call.result_bytes,
        "airlock.result.truncated": call.truncated,
    }
    if refused is not None:
        attributes.update({"airlock.refused.code": refused.code, "airlock.refused.reason": refused.message})
    record_span_safely(
        what="the client-executed call's span",
        run=call.run,
        kind="tool_call",
        name=f"{call.name} (run by the agent)",
        started_at=started_at,
        ended_at=finished_at,
        call=call,
        skill_name=call.name,
        skill_version=_skill_of(call)["version"],
        outcome="error" if result["is_error"] else "ok",
        error_class=(result.get("error") or {}).get("class", ""),
        attributes=attributes,
    )


def accept_client_result(
    *, call: ToolCall, token: str, content: Any = None, error: dict | None = None, adapter_version: str = ""
) -> dict:
    """Check the token, shape and record what the agent's function returned, and return the shaped result.

    Reporting the same outcome again returns the recorded result (so the SDK may retry); a
    different outcome for a call already reported is refused.
    """
    read_token(token, call=call)
    if error is not None and not isinstance(error, dict):
        raise ValidationFailed("`error` must be an object with a `message`.", code="invalid_error")
    reported_hash = sha256_of({"content": content, "error": error})
    with transaction.atomic():
        locked = (
            ToolCall.objects.select_for_update(of=("self",))
            .select_related("run__tenant", "run__agent", "run__snapshot", "skill_version")
            .get(pk=call.pk)
        )
        if locked.status != CallStatus.EXECUTING:
            if locked.result is not None and (locked.decision or {}).get(RESULT_HASH_KEY) == reported_hash:
                return locked.result
            raise AlreadyReported(f"This call already has a result ({locked.status}).")
        refusal = _live_refusal(locked)
        if refusal is not None:
            result = {"call_id": locked.call_id, "status": "error", "is_error": True, "error": refusal.as_error()}
            lifecycle.finish_execution(
                locked,
                status=CallStatus.DECLINED if refusal.error_class == "declined" else CallStatus.DENIED,
                result=result,
                error_class=refusal.error_class,
                finished_at=timezone.now(),
                decision={
                    **(locked.decision or {}),
                    RESULT_HASH_KEY: reported_hash,
                    "refused_at_execution": {"code": refusal.code, "reason": refusal.message},
                },
            )
        else:
            result = _record_reported(
                locked, content=content, error=error, reported_hash=reported_hash, adapter_version=adapter_version
            )
        payload: dict[str, Any] = {"call_id": locked.call_id, "result": result}
        approval_id = _approval_id(locked)
        if approval_id is not None:
            payload["approval_id"] = approval_id
        append_event(run=locked.run, kind="call.completed", payload=payload)
        _record_span(
            call=locked,
            result=result,
            started_at=locked.started_at or locked.finished_at,
            finished_at=locked.finished_at,
            refused=refusal,
        )
    return result


def _live_refusal(call: ToolCall) -> CallError | None:
    """The same live checks as every other execution, before a reported result is accepted as the outcome."""
    arguments = unseal(call.sealed_arguments) if call.sealed_arguments else call.arguments
    approved = "confirm" if call.verdict == "confirm" else (call.verdict or "allow")
    return recorded_call_refusal(path=Path.CLIENT_RESULT, call=call, arguments=arguments, approved_verdict=approved)


def reported_outcome(
    call: ToolCall, *, content: Any, error: dict | None, adapter_version: str = ""
) -> tuple[str, dict, dict, dict]:
    """What the agent's function returned, cleaned and shaped as every result is: (status, result, the call's
    outcome fields, what the call's decision keeps). Used for a token-bound report and for a spooled call
    decided locally (runs.local_calls)."""
    manifest = _manifest(call)
    fields: dict[str, Any] = {}
    recorded: dict[str, Any] = {}  # kept in the call's decision, beside the reported result's hash
    if error is not None:
        message = redact_text(error.get("message") or "The client-executed skill failed.", limit=2000)
        result = {
            "call_id": call.call_id,
            "status": "error",
            "is_error": True,
            "error": {"class": "unavailable", "code": "client_skill_failed", "message": message},
        }
        return CallStatus.FAILED, result, {"error_class": "unavailable"}, recorded
    limit = (manifest.get("execution") or {}).get("result_limit_bytes")
    cleaned = fencing.clean(content)  # the agent's process reports it: the same hygiene as every result
    shaped = shape(cleaned.content, limit, output_schema=manifest.get("output_schema"))
    result = {
        "call_id": call.call_id,
        "status": "ok",
        "is_error": False,
        "content": shaped.content,
        "skill": _skill_of(call),
        "truncated": shaped.truncated,
        "warnings": [],
    }
    origin = fencing.provenance(
        skill=call.name,
        version=result["skill"].get("version", ""),
        adapter=(manifest.get("execution") or {}).get("adapter", ""),
        untrusted=bool((manifest.get("risk") or {}).get("untrusted_output")),
        removed=cleaned.removed,
    )
    if origin:
        result["provenance"] = origin
    if shaped.truncated:
        result["truncation"] = shaped.truncation
    fields.update(
        error_class="",
        truncated=shaped.truncated,
        result_bytes=shaped.size,
        result_sha256=sha256_of(shaped.content),
    )
    recorded["shaping"] = shaped.summary
    recorded.update(
        result_facts.record_facts(call=call, manifest=manifest, content=shaped.content, adapter_version=adapter_version)
    )
    fields["result_tokens"] = call.result_tokens
    return CallStatus.SUCCEEDED, result, fields, recorded


def returns_untrusted(call: ToolCall) -> bool:
    return bool((_manifest(call).get("risk") or {}).get("untrusted_output"))


def _record_reported(
    call: ToolCall, *, content: Any, error: dict | None, reported_hash: str, adapter_version: str
) -> dict:
    """The agent's SDK ran the function: it is the adapter, and `adapter_version` is its own version."""
    status, result, fields, recorded = reported_outcome(
        call, content=content, error=error, adapter_version=adapter_version
    )
    if status == CallStatus.SUCCEEDED and returns_untrusted(call):
        taint_run(call.run, f"{call.name} ({call.call_id}) returned untrusted content")
    lifecycle.finish_execution(
        call,
        status=status,
        result=result,
        finished_at=timezone.now(),
        decision={**(call.decision or {}), RESULT_HASH_KEY: reported_hash, **recorded},
        **fields,
    )
    return result


def _approval_id(call: ToolCall) -> int | None:
    try:
        return call.approval.pk  # approvals.ApprovalRequest, one-to-one with the call
    except Exception:
        return None


def taint_run(run: Run, source: str) -> None:
    """Mark the run tainted by `source`, once (the first source is kept)."""
    if not run.tainted:
        Run.objects.filter(pk=run.pk, tainted=False).update(tainted=True, taint_source=source[:300])
        run.tainted, run.taint_source = True, source[:300]
