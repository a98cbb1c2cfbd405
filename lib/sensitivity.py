"""What counts as sensitive, written once: for redaction at rest (traces.redaction) and for masking on
screen (approvals.masking).

A value is sensitive when the skill's JSON Schema marks its field (`writeOnly`, `format: password`,
`x-airlock-sensitive`, or the older `x-sensitive`), when its key names a credential (`password`,
`token`, `api_key`, ...), or, inside any string, when a substring looks like a secret (provider
API keys, bearer tokens, JWTs, PEM private keys, Airlock's own keys, card numbers passing Luhn, and
credentials written inline: `password=…`, `token: …`, `"api_key": "…"`, `Authorization: Bearer …`).
"""

import hashlib
import re
from functools import lru_cache
from typing import Any

# Each pattern matches a whole secret; the match is replaced by a masked form that keeps only a
# recognisable prefix, so a reader can tell what kind of secret was there.
_SECRET_PATTERNS: list[tuple[str, re.Pattern[str]]] = [
    (
        "pem",
        re.compile(r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----.*?(?:-----END [A-Z0-9 ]*PRIVATE KEY-----|\Z)", re.DOTALL),
    ),
    ("jwt", re.compile(r"\beyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]*")),
    ("bearer", re.compile(r"(?i)\b(bearer|basic|token)\s+[A-Za-z0-9._~+/=-]{8,}")),
    ("openai", re.compile(r"\bsk-(?:proj-|ant-|live-|test-)?[A-Za-z0-9_-]{16,}")),
    ("stripe", re.compile(r"\b(?:sk|rk|pk)_(?:live|test)_[A-Za-z0-9]{10,}")),
    ("github", re.compile(r"\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{20,}|\bgithub_pat_[A-Za-z0-9_]{20,}")),
    ("aws", re.compile(r"\b(?:AKIA|ASIA)[A-Z0-9]{16}\b")),
    ("slack", re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}")),
    ("google", re.compile(r"\bAIza[0-9A-Za-z_-]{35}")),
    ("airlock", re.compile(r"\b(?:ak|pat)_[A-Za-z0-9_-]{12,}")),
    ("password_in_url", re.compile(r"(?<=://)[^/\s:@]+:[^/\s@]+(?=@)")),
]
# Credentials written inline in free text: `password=…`, `token: …`, `"api_key": "…"`, `Authorization: Bearer …`,
# `client_secret=…` in a query string. The key and separator stay; only the value is masked. No nested
# quantifiers (linear time); a value already masked (it starts with "…") is left alone, so masking twice
# changes nothing.
_KEY_VALUE = re.compile(
    r"(?i)(?<![a-z0-9])(?:passw(?:or)?d|pwd|passphrase|secret|token|api[_-]?key|apikey|access[_-]?key"
    r"|private[_-]?key|authorization|credentials?|cookie)(?:[_.-][a-z0-9]+){0,3}"
    r"[\"']?[ \t]*[=:][ \t]*(?:(?:bearer|basic|token)[ \t]+|(?!(?:bearer|basic|token)[ \t]))"
    r"(?:\"(?P<dq>(?!…)[^\"\n]+)\"|'(?P<sq>(?!…)[^'\n]+)'|(?P<bare>(?!…)[^\s\"'&<>]+))"
)
# Payment card numbers: 13-19 digits (optionally grouped), masked only when the Luhn check passes.
_CARD = re.compile(r"\b(?:\d[ -]?){12,18}\d\b")
# A UUID's leading groups can be all digits and pass Luhn ("53586182-3078-4510-b4ae-…"): an id, not a card.
_UUID = re.compile(r"\b[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\b", re.IGNORECASE)
# Cheap pre-check: most strings contain none of these fragments and skip the regexes entirely.
_HINTS = (
    "-----BEGIN",
    "eyJ",
    "earer",
    "EARER",
    "asic",
    "ASIC",
    "oken",
    "OKEN",
    "sk-",
    "_live_",
    "_test_",
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "AKIA",
    "ASIA",
    "xox",
    "AIza",
    "ak_",
    "pat_",
    "://",
)


# Keys whose values are credentials whatever they look like (matched on the last dotted segment).
_SECRET_KEYS = re.compile(
    r"^(password|passwd|passphrase|secret|client_secret|token|access_token|refresh_token|id_token"
    r"|api_key|apikey|x-api-key|authorization|private_key|credentials?|cookie|set-cookie)$",
    re.IGNORECASE,
)


@lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEYS.match(key.rsplit(".", 1)[-1]))


_HINT_RE = re.compile("|".join(re.escape(hint) for hint in _HINTS))
_DIGITS_RE = re.compile(r"\d{4}[ -]?\d{4}")


def _mask_secret(match: re.Match[str]) -> str:
    text = match.group(0)
    return f"{text[:4]}…[redacted:{hashlib.sha256(text.encode()).hexdigest()[:12]}]"


def _luhn_ok(digits: str) -> bool:
    total = 0
    for index, char in enumerate(reversed(digits)):
        number = int(char)
        if index % 2:
            number = number * 2 - 9 if number > 4 else number * 2
        total += number
    return total % 10 == 0


def _mask_card(match: re.Match[str]) -> str:
    digits = re.sub(r"\D", "", match.group(0))
    if not 13 <= len(digits) <= 19 or not _luhn_ok(digits):
        return match.group(0)
    return f"card…{digits[-4:]}[redacted:{hashlib.sha256(digits.encode()).hexdigest()[:12]}]"


def _mask_cards(text: str) -> str:
    uuids = [found.span() for found in _UUID.finditer(text)]

    def mask_unless_in_a_uuid(match: re.Match[str]) -> str:
        if any(start < match.end() and match.start() < end for start, end in uuids):
            return match.group(0)
        return _mask_card(match)

    return _CARD.sub(mask_unless_in_a_uuid, text)


_CREDENTIAL_WORDS = ("pass", "pwd", "secret", "token", "key", "authorization", "credential", "cookie")


def _has_credential_word(text: str) -> bool:
    lowered = text.lower()
    return any(word in lowered for word in _CREDENTIAL_WORDS)


def _mask_value(match: re.Match[str]) -> str:
    group = match.lastgroup or "bare"
    value = match.group(group)
    start, end = match.start(group) - match.start(), match.end(group) - match.start()
    text = match.group(0)
    return f"{text[:start]}…[redacted:{hashlib.sha256(value.encode()).hexdigest()[:12]}]{text[end:]}"


def mask_secrets(text: str) -> str:
    """Mask every substring that looks like a credential or a card number; other text is kept as is."""
    if ("=" in text or ":" in text) and _has_credential_word(text):
        text = _KEY_VALUE.sub(_mask_value, text)
    if _HINT_RE.search(text):
        for _kind, pattern in _SECRET_PATTERNS:
            text = pattern.sub(_mask_secret, text)
    if _DIGITS_RE.search(text):
        text = _mask_cards(text)
    return text


@lru_cache(maxsize=4096)
def safe_key_of(key: str) -> str:
    """Keys repeat across spans: mask them once."""
    return mask_secrets(key)


def looks_secret(text: str) -> bool:
    return mask_secrets(text) != text


def is_sensitive_schema(schema: Any) -> bool:
    return isinstance(schema, dict) and (
        schema.get("writeOnly") is True
        or schema.get("format") == "password"
        or bool(schema.get("x-airlock-sensitive"))
        or bool(schema.get("x-sensitive"))
    )


def child_schema(schema: Any, key: str) -> Any:
    if not isinstance(schema, dict):
        return None
    props = schema.get("properties")
    if isinstance(props, dict) and key in props:
        return props[key]
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def item_schema(schema: Any) -> Any:
    if not isinstance(schema, dict):
        return None
    items = schema.get("items")
    return items if isinstance(items, dict) else None


def is_sensitive_field(key: str, value: Any, schema: Any) -> bool:
    """A field whose whole value is hidden: marked by its schema, or a credential by its key's name."""
    return is_sensitive_schema(schema) or (
        is_secret_key(key) and isinstance(value, str | int) and not isinstance(value, bool)
    )
