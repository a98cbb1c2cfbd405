"""An agent's question to a person (`human.ask`, runs/builtin_tools.py), as the approvers see and answer it.

The call is a request like any other (routing, claims, expiry, the audit log); what differs is the decision:
instead of approving it, an approver answers. The worker resumes it like any approved call (the kernel asks
again, exactly once), with the answer put into its `answer` argument, which the built-in returns.
The writes go through `approvals.services.decide_approval` (decision "answer"); this module reads.
"""

from __future__ import annotations

from typing import Any

from approvals.call_arguments import raw_arguments
from approvals.models import ApprovalRequest
from runs import builtin_tools
from traces.redaction import redact_text

MAX_TEXT_CHARS = builtin_tools.MAX_QUESTION_CHARS  # a question either way, and an answer


class InvalidAnswer(ValueError):
    """What is wrong with an answer, in words for the person who gave it."""


def is_question(approval: ApprovalRequest) -> bool:
    return builtin_tools.asks_a_person(approval.skill_name)


def question_in(arguments: Any) -> dict[str, Any]:
    """The question and its choices in a human.ask call's arguments (as they are shown to this reader)."""
    arguments = arguments if isinstance(arguments, dict) else {}
    return {"question": str(arguments.get("question") or ""), "choices": list(arguments.get("choices") or [])}


def question_of(approval: ApprovalRequest) -> dict[str, Any]:
    """The question and its choices, exactly as the agent asked them."""
    return question_in(raw_arguments(approval.call))


def checked_answer(approval: ApprovalRequest, answer: str) -> str:
    """The answer as it is kept and returned (a pasted secret masked), or InvalidAnswer."""
    text = (answer or "").strip()
    if not text:
        raise InvalidAnswer("Write an answer (or pick one): it is what the agent gets back.")
    if len(text) > MAX_TEXT_CHARS:
        raise InvalidAnswer(f"An answer holds at most {MAX_TEXT_CHARS} characters.")
    choices = question_of(approval)["choices"]
    if choices and text not in choices:
        raise InvalidAnswer("The agent asked you to pick one of its choices: " + "; ".join(choices) + ".")
    return redact_text(text)


def with_answer(approval: ApprovalRequest, arguments: Any) -> Any:
    """The approved arguments as the call executes them: a question's carry the person's answer."""
    if not is_question(approval) or not isinstance(arguments, dict):
        return arguments
    return {**arguments, builtin_tools.ANSWER: approval.answer}
