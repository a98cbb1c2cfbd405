"""A logging filter that masks secrets in every record before a handler writes it.

Access logs carry full request lines, query strings included (`GET /api/v1/skills/search?q=my key
sk-live-…`), and other loggers interpolate values into their messages. The filter masks both the
message and its arguments with `lib.sensitivity.mask_secrets`, the one definition of a secret.
A URL-encoded text is decoded first, so `%20sk-live-…` or `4111+1111+1111+1111` is caught too.
Configured in `console/settings.py` LOGGING on the console handler and on `uvicorn.access`.
"""

from __future__ import annotations

import logging
from typing import Any
from urllib.parse import unquote_plus

from lib.sensitivity import mask_secrets


def mask_logged_text(text: str) -> str:
    """The text with its secrets masked; an encoded one is decoded when that reveals a secret."""
    masked = mask_secrets(text)
    if "%" in text or "+" in text:
        decoded = unquote_plus(text)
        if decoded != text:
            masked_decoded = mask_secrets(decoded)
            if masked_decoded != decoded:
                return masked_decoded
    return masked


def _masked(value: Any) -> Any:
    if isinstance(value, str):
        return mask_logged_text(value)
    if value is None or isinstance(value, bool | int | float):
        return value  # kept as it is, for %d and %.2f
    text = str(value)  # a dict, an exception, a model: shown as masked text only when it holds a secret
    masked = mask_logged_text(text)
    return value if masked == text else masked


class MaskSecretsFilter(logging.Filter):
    """Rewrites the record in place (message, arguments, traceback text); never drops one."""

    def filter(self, record: logging.LogRecord) -> bool:
        # The arguments one by one first: formatters that read them (uvicorn's access formatter) keep working.
        if isinstance(record.args, tuple):
            record.args = tuple(_masked(arg) for arg in record.args)
        elif isinstance(record.args, dict):
            record.args = {key: _masked(value) for key, value in record.args.items()}
        # Then the whole message, for a secret split between the template and an argument ("password=%s").
        try:
            message = record.getMessage()
        except Exception:  # a malformed record: logging reports it as it would have anyway
            message = None
        if message is not None:
            masked = mask_logged_text(message)
            if masked != message:
                record.msg, record.args = masked, None
        if record.exc_info and not record.exc_text:
            # Formatters reuse exc_text once set: the traceback is written masked.
            record.exc_text = mask_logged_text(_FORMATTER.formatException(record.exc_info))
        elif record.exc_text:
            record.exc_text = mask_logged_text(record.exc_text)
        return True


_FORMATTER = logging.Formatter()
