"""Airlock SDK: the client that agents embed to send tool calls through Airlock."""

__version__ = "0.1.0"

from airlock_sdk.client import Airlock, ToolList, tool_name, tool_skill  # noqa: E402
from airlock_sdk.client_skills import ClientSkillRegistry, client_skill  # noqa: E402
from airlock_sdk.errors import (  # noqa: E402
    AirlockError,
    APIError,
    ApprovalTimeout,
    AuthenticationError,
    ControlPlaneUnavailable,
    NotFound,
    OutcomeUnknown,
    PermissionDenied,
    RateLimited,
    SnapshotAudienceError,
    SnapshotKeyChanged,
    SnapshotRollbackError,
    SnapshotVerificationError,
    TransportError,
    UnknownClientSkill,
    WebhookVerificationError,
)
from airlock_sdk.results import ApprovalRequired, Error, Ok, Result  # noqa: E402
from airlock_sdk.run import Run  # noqa: E402
from airlock_sdk.webhooks import DeliveryLog, WebhookVerifier, sign_webhook, verify_webhook  # noqa: E402

__all__ = [
    "APIError",
    "Airlock",
    "AirlockError",
    "ApprovalRequired",
    "ApprovalTimeout",
    "AuthenticationError",
    "ClientSkillRegistry",
    "ControlPlaneUnavailable",
    "DeliveryLog",
    "Error",
    "NotFound",
    "Ok",
    "OutcomeUnknown",
    "PermissionDenied",
    "RateLimited",
    "Result",
    "Run",
    "SnapshotAudienceError",
    "SnapshotKeyChanged",
    "SnapshotRollbackError",
    "SnapshotVerificationError",
    "ToolList",
    "TransportError",
    "UnknownClientSkill",
    "WebhookVerificationError",
    "WebhookVerifier",
    "client_skill",
    "sign_webhook",
    "tool_name",
    "tool_skill",
    "verify_webhook",
]
