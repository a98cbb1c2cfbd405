"""Whether two spellings name the same person: the one comparison behind the self-approval rule.

End-user identifiers arrive as free text from agents (`bob`, `BOB`, `user:bob`, `ｂｏｂ`, `bob\u200b`,
`Bob <bob@example.com>`, `acme\\bob`, `<@bob>`, `uid=bob,ou=people`, `bоb` with a Cyrillic `о`).
Compared exactly, each of those is "someone else" and a person could approve a run acting for them.

`identity_key` reduces a spelling to its plain form: every Default_Ignorable_Code_Point gone (zero-width
spaces and joiners, soft hyphens, byte-order marks, bidirectional controls, variation selectors, the
combining grapheme joiner, Hangul fillers: Unicode's own list, read from ICU), Unicode NFKC_Casefold
(full-width and compatibility forms to plain letters, full case folding), no surrounding space, and no
leading kind prefix such as `user:` or `mailto:`. `identity_keys` then reads every way the spelling can
name someone: the address and display name of an e-mail header (standard-library parsing), quotes and
angle brackets removed, a leading `@` (Slack's `<@bob>` and `<@U123|bob>` too), trailing dots, a
`DOMAIN\\` prefix, any provider prefix (`slack:`, `github:`, `okta:` ...), the `uid=`/`cn=` value of an
LDAP DN, an e-mail's local part without its `+tag`. Each reading is taken as written, in the PRECIS
UsernameCaseMapped form (RFC 8264/8265) where PRECIS accepts it, NFKC-casefolded, and in capitals; each of
those is reduced to its UTS #39 confusable skeleton (ICU's spoof checker, with Unicode's complete
confusables table), case folded again, and kept to its letters and digits (accents, overlays,
punctuation and spaces dropped). Two spellings are the same person when any of their keys meet. The
reading is generous on purpose: refusing a self-approval someone was entitled to is the safe error;
missing one is not.

An end user written `account:<id>` is bound to an Airlock account id, and is compared by that id alone.
"""

import re
from contextlib import suppress
from email.utils import parseaddr
from typing import Protocol

import icu
from precis_i18n import get_profile

# Words that say what kind of identifier follows, not who it is: `user:bob` is bob.
KIND_PREFIXES = re.compile(
    r"^(?:user|users|username|login|email|e-mail|mail|mailto|principal|subject|sub|uid)"
    r"\s*[:/=]\s*",
    re.IGNORECASE,
)
ACCOUNT_PREFIX = re.compile(r"^(?:account|airlock|account_id|user_id)\s*[:/=]\s*(\d{1,18})$")
# Any leading word and a colon names a provider or a kind (`slack:`, `github:`, `azuread:`, `okta:`).
PROVIDER_PREFIX = re.compile(r"^[^\s:@<>\"']{1,40}\s*:\s*")
DN_NAME_ATTRIBUTES = frozenset({"uid", "cn", "userid", "samaccountname", "mail", "email"})
WRAPPERS = ("<>", '""', "''", "``", "()", "[]")
MAX_KEYS = 64  # a spelling yields a handful; the bound keeps a hostile one from growing without end

USERNAME_PROFILE = get_profile("UsernameCaseMapped")  # RFC 8265
SPOOF_CHECKER = icu.SpoofChecker()  # UTS #39 skeletons; ICU's checks may share one checker between threads
NFKC = icu.Normalizer2.getNFKCInstance()
NFKC_CASEFOLD = icu.Normalizer2.getNFKCCasefoldInstance()
IGNORABLE = icu.UnicodeSet("[:Default_Ignorable_Code_Point:]")
LETTERS_AND_DIGITS = icu.UnicodeSet("[[:L:][:N:]]")
IGNORABLE.freeze()
LETTERS_AND_DIGITS.freeze()


class Person(Protocol):
    pk: int | None
    email: str

    def get_username(self) -> str: ...


def _visible(text: str) -> str:
    return "".join(ch for ch in text if not IGNORABLE.contains(ch))


def _plain(text: str) -> str:
    """NFKC with every default-ignorable code point dropped (before, and after: NFKC makes U+FFA0 U+3164)."""
    return _visible(NFKC.normalize(_visible(text or ""))).strip()


def identity_key(text: str) -> str:
    """The plain form of an identifier: Unicode forms, case, invisible characters and kind prefixes gone."""
    value = NFKC_CASEFOLD.normalize(_plain(text)).strip()
    while True:  # `user:mailto:bob@x` as well as `user:bob`
        stripped = KIND_PREFIXES.sub("", value, count=1)
        if stripped == value:
            return value
        value = stripped


def skeleton(text: str) -> str:
    """The UTS #39 skeleton, case folded, letters and digits only: `bоb`, `aɫice`, `Ꭺlice` → bob, alice, alice."""
    folded = NFKC_CASEFOLD.normalize(SPOOF_CHECKER.getSkeleton(0, _visible(text)))
    return "".join(ch for ch in folded if LETTERS_AND_DIGITS.contains(ch))


def _forms(reading: str) -> set[str]:
    """The reading as written, in capitals (`ALICE` with a small `l` for the `I`), NFKC-casefolded, and in
    PRECIS's UsernameCaseMapped form, which refuses much (spaces, symbols, some scripts)."""
    forms = {reading, reading.upper(), NFKC_CASEFOLD.normalize(reading)}
    with suppress(UnicodeError):
        forms.add(USERNAME_PROFILE.enforce(reading))
    return forms


def _readings(value: str) -> set[str]:
    """Each shorter way this spelling may name someone, one step of unwrapping each."""
    found = {value.strip(), value.rstrip(".").strip(), value.lstrip("@").strip()}
    found |= {value[1:-1] for pair in WRAPPERS if len(value) > 1 and value[0] + value[-1] == pair}
    found |= set(value.split("|")) if "|" in value else set()  # Slack's <@U024BE7LH|bob>
    if "\\" in value:
        found.add(value.rsplit("\\", 1)[1])  # ACME\bob
    found.add(KIND_PREFIXES.sub("", value, count=1))
    found.add(PROVIDER_PREFIX.sub("", value, count=1))
    if "<" in value or '"' in value:  # `Bob <bob@example.com>`, `"bob"`: an address header's parts
        found |= set(parseaddr(value))
    if "=" in value:  # uid=bob,ou=people,dc=example
        for part in value.split(","):
            attribute, _, name = part.partition("=")
            if attribute.strip().casefold() in DN_NAME_ATTRIBUTES:
                found.add(name)
    local, at, domain = value.rpartition("@")
    if at and local:
        untagged = local.split("+", 1)[0]
        found |= {local, untagged, f"{untagged}@{domain.rstrip('.')}"}
    return {reading.strip() for reading in found}


def identity_keys(text: str) -> frozenset[str]:
    """Every key this spelling may name a person by (see the module docstring); empty for an empty name."""
    readings: set[str] = set()
    # As sent too: skeletons are defined on it, and NFKC turns some lookalikes into other letters (`ϲ` into
    # `ς`, `˛` into a space and a combining ogonek).
    pending = [_visible(text or "").strip(), _plain(text), identity_key(text)]
    while pending and len(readings) < MAX_KEYS:
        value = pending.pop()
        if not value or value in readings:
            continue
        readings.add(value)
        pending.extend(_readings(value) - readings)
    return frozenset(skeleton(form) for reading in readings for form in _forms(reading)) - {""}


def bound_account_id(text: str) -> int | None:
    """The Airlock account id an end user written `account:<id>` is bound to, else None."""
    match = ACCOUNT_PREFIX.match(identity_key(text))
    return int(match.group(1)) if match else None


def is_same_person(end_user: str, user: Person) -> bool:
    """True when the end user a run acts for is this account: by bound id, else by username or e-mail."""
    account_id = bound_account_id(end_user)
    if account_id is not None:
        return user.pk is not None and account_id == user.pk
    account_keys = identity_keys(user.get_username()) | identity_keys(user.email or "")
    return not identity_keys(end_user).isdisjoint(account_keys)
