"""Whether two spellings name the same person: the one comparison behind the self-approval rule.

End-user identifiers arrive as free text from agents (`bob`, `BOB`, `user:bob`, `ｂｏｂ`, `bob\u200b`).
Compared exactly, each of those is "someone else" and a person could approve a run acting for them.
`identity_key` reduces a spelling to one key: Unicode NFKC (full-width and compatibility forms to
plain letters), case folding, no invisible format characters (zero-width spaces and joiners,
soft hyphens, byte-order marks, bidirectional controls), no surrounding space, and no leading
kind prefix such as `user:` or `mailto:`. An end user written `account:<id>` is bound to an Airlock
account id, and is compared by that id alone.

Lookalike letters from other scripts (Cyrillic `о` for Latin `o`) are not folded: see docs/security.md.
"""

import re
import unicodedata
from typing import Protocol

# Words that say what kind of identifier follows, not who it is: `user:bob` is bob.
KIND_PREFIXES = re.compile(
    r"^(?:user|users|username|login|email|e-mail|mail|mailto|principal|subject|sub|uid)"
    r"\s*[:/=]\s*"
)
ACCOUNT_PREFIX = re.compile(r"^(?:account|airlock|account_id|user_id)\s*[:/=]\s*(\d{1,18})$")


class Person(Protocol):
    pk: int | None
    email: str

    def get_username(self) -> str: ...


def identity_key(text: str) -> str:
    """The comparable form of an identifier; equal keys mean the same person."""
    value = unicodedata.normalize("NFKC", text or "")
    value = "".join(ch for ch in value if unicodedata.category(ch) != "Cf")  # zero-width, bidi, soft hyphen
    value = unicodedata.normalize("NFKC", value.casefold()).strip()
    while True:  # `user:mailto:bob@x` as well as `user:bob`
        stripped = KIND_PREFIXES.sub("", value, count=1)
        if stripped == value:
            return value
        value = stripped


def bound_account_id(text: str) -> int | None:
    """The Airlock account id an end user written `account:<id>` is bound to, else None."""
    match = ACCOUNT_PREFIX.match(identity_key(text))
    return int(match.group(1)) if match else None


def is_same_person(end_user: str, user: Person) -> bool:
    """True when the end user a run acts for is this account: by bound id, else by username or e-mail."""
    account_id = bound_account_id(end_user)
    if account_id is not None:
        return user.pk is not None and account_id == user.pk
    key = identity_key(end_user)
    if not key:
        return False
    return key in {identity_key(user.get_username()), identity_key(user.email or "")} - {""}
