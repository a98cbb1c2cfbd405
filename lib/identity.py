"""Whether two spellings name the same person: the one comparison behind the self-approval rule.

End-user identifiers arrive as free text from agents (`bob`, `BOB`, `user:bob`, `ｂｏｂ`, `bob\u200b`,
`Bob <bob@example.com>`, `acme\\bob`, `<@bob>`, `uid=bob,ou=people`, `bоb` with a Cyrillic `о`).
Compared exactly, each of those is "someone else" and a person could approve a run acting for them.

`identity_key` reduces a spelling to its plain form: Unicode NFKC (full-width and compatibility forms
to plain letters), case folding, no invisible format characters (zero-width spaces and joiners, soft
hyphens, byte-order marks, bidirectional controls), no surrounding space, and no leading kind prefix
such as `user:` or `mailto:`. `identity_keys` then reads every way the plain form can name someone:
the address and display name of an e-mail header (standard-library parsing), quotes and angle brackets
removed, a leading `@` (Slack's `<@bob>` and `<@U123|bob>` too), trailing dots, a `DOMAIN\\` prefix, any
provider prefix (`slack:`, `github:`, `okta:` ...), the `uid=`/`cn=` value of an LDAP DN, an e-mail's
local part without its `+tag`; and reduces each to a confusables skeleton (accents and combining marks
dropped, lookalike Cyrillic, Greek and Turkish letters folded to Latin). Two spellings are the same
person when any of their keys meet. The reading is generous on purpose: refusing a self-approval
someone was entitled to is the safe error; missing one is not.

An end user written `account:<id>` is bound to an Airlock account id, and is compared by that id alone.
"""

import re
import unicodedata
from email.utils import parseaddr
from typing import Protocol

# Words that say what kind of identifier follows, not who it is: `user:bob` is bob.
KIND_PREFIXES = re.compile(
    r"^(?:user|users|username|login|email|e-mail|mail|mailto|principal|subject|sub|uid)"
    r"\s*[:/=]\s*"
)
ACCOUNT_PREFIX = re.compile(r"^(?:account|airlock|account_id|user_id)\s*[:/=]\s*(\d{1,18})$")
# Any leading word and a colon names a provider or a kind (`slack:`, `github:`, `azuread:`, `okta:`).
PROVIDER_PREFIX = re.compile(r"^[^\s:@<>\"']{1,40}\s*:\s*")
DN_NAME_ATTRIBUTES = frozenset({"uid", "cn", "userid", "samaccountname", "mail", "email"})
WRAPPERS = ("<>", '""', "''", "``", "()", "[]")
MAX_KEYS = 64  # a spelling yields a handful; the bound keeps a hostile one from growing without end

# Letters of other scripts that look like Latin ones (after case folding), from Unicode's confusables
# list (UTS #39): enough to stop a name respelled with them; accents are dropped separately.
CONFUSABLES = str.maketrans(
    {
        # Cyrillic
        "а": "a", "в": "b", "ь": "b", "с": "c", "ԁ": "d", "е": "e", "ё": "e", "ѐ": "e", "һ": "h",
        "н": "h", "і": "i", "ї": "i", "ӏ": "l", "ј": "j", "к": "k", "м": "m", "о": "o",
        "р": "p", "ԛ": "q", "г": "r", "ѕ": "s", "т": "t", "у": "y", "ў": "y", "ԝ": "w",
        "х": "x",
        # Greek
        "α": "a", "β": "b", "ϲ": "c", "δ": "d", "ε": "e", "η": "n", "ι": "i", "ϳ": "j", "κ": "k",
        "ν": "v", "ο": "o", "ρ": "p", "ϱ": "p", "τ": "t", "υ": "u", "χ": "x", "γ": "y", "ω": "w",
        "ϝ": "f",
        # Latin lookalikes: Turkish dotless i, long s, small capitals and IPA letters
        "ı": "i", "ſ": "s", "ɑ": "a", "ɡ": "g", "ɩ": "i", "ʟ": "l", "ɪ": "i", "ᴏ": "o", "ᴜ": "u",
        "ꜱ": "s", "ᴠ": "v", "ᴡ": "w", "ᴢ": "z", "ɴ": "n", "ʀ": "r", "ᴄ": "c", "ᴅ": "d", "ᴇ": "e",
        "ǀ": "l", "ł": "l", "ø": "o", "đ": "d", "ħ": "h",
    }
)  # fmt: skip


class Person(Protocol):
    pk: int | None
    email: str

    def get_username(self) -> str: ...


def _plain(text: str) -> str:
    value = unicodedata.normalize("NFKC", text or "")
    value = "".join(ch for ch in value if unicodedata.category(ch) != "Cf")  # zero-width, bidi, soft hyphen
    return unicodedata.normalize("NFKC", value.casefold()).strip()


def identity_key(text: str) -> str:
    """The plain form of an identifier: Unicode forms, case, invisible characters and kind prefixes gone."""
    value = _plain(text)
    while True:  # `user:mailto:bob@x` as well as `user:bob`
        stripped = KIND_PREFIXES.sub("", value, count=1)
        if stripped == value:
            return value
        value = stripped


def skeleton(text: str) -> str:
    """The text with combining marks dropped and lookalike letters folded to Latin: `bоb`, `ALİCE` → bob, alice."""
    bare = "".join(ch for ch in unicodedata.normalize("NFD", text) if not unicodedata.combining(ch))
    return unicodedata.normalize("NFC", bare.translate(CONFUSABLES))


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
            if attribute.strip() in DN_NAME_ATTRIBUTES:
                found.add(name)
    local, at, domain = value.rpartition("@")
    if at and local:
        untagged = local.split("+", 1)[0]
        found |= {local, untagged, f"{untagged}@{domain.rstrip('.')}"}
    return {reading.strip() for reading in found}


def identity_keys(text: str) -> frozenset[str]:
    """Every key this spelling may name a person by (see the module docstring); empty for an empty name."""
    keys: set[str] = set()
    pending = [_plain(text), identity_key(text)]
    while pending and len(keys) < MAX_KEYS:
        value = pending.pop()
        if not value or value in keys:
            continue
        keys.add(value)
        pending.extend(_readings(value) - keys)
    return frozenset(skeleton(key) for key in keys) - {""}


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
