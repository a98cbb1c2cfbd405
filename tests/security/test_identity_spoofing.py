"""The attacker respells their own name with Unicode's lookalikes and invisibles to approve their own run.

A review found `alice` followed by U+034F (combining grapheme joiner) or U+FE0F (variation selector),
`a` U+3164 (Hangul filler) `lice`, `aɫice` (U+026B) and Cherokee `Ꭺlice` (U+13AA) all passed for someone
other than alice. Here every name an approver might have is respelled from the standards' own data: each
letter swapped for each lookalike that UTS #39's confusables table (ICU's copy, the one lib/identity.py
uses) gives it, and each Default_Ignorable_Code_Point slipped in at each position. All of them are the
approver; a few genuinely different names are not.
"""

from dataclasses import dataclass
from functools import cache

import icu
import pytest

from lib.identity import is_same_person

APPROVER_NAMES = ["alice", "bob", "olivia", "adam", "gina"]
REVIEW_SPELLINGS_OF_ALICE = ["alice\u034f", "alice\ufe0f", "a\u3164lice", "a\u026bice", "\u13aalice"]
SPOOF = icu.SpoofChecker()


@dataclass
class Account:
    """Stands in for a user: what is_same_person reads of one."""

    username: str
    email: str = ""
    pk: int | None = None

    def get_username(self) -> str:
        return self.username


@cache
def _lookalikes() -> dict[str, tuple[str, ...]]:
    """Every assigned code point, grouped by its UTS #39 skeleton."""
    groups: dict[str, list[str]] = {}
    for char in icu.UnicodeSet("[[:^Cn:]-[:Cs:]-[:Co:]]"):
        groups.setdefault(SPOOF.getSkeleton(0, char), []).append(char)
    return {skeleton: tuple(chars) for skeleton, chars in groups.items()}


def _confusable_spellings(name: str) -> list[str]:
    """The name with one letter swapped for each of that letter's lookalikes in the confusables table."""
    spellings = []
    for position, letter in enumerate(name):
        for lookalike in _lookalikes()[SPOOF.getSkeleton(0, letter)]:
            if lookalike != letter:
                spellings.append(name[:position] + lookalike + name[position + 1 :])
    return spellings


def _ignorable_spellings(name: str) -> list[str]:
    """The name with a default-ignorable code point slipped in: every assigned one at every position,
    and every one (the reserved ones too) at some position."""
    assigned = icu.UnicodeSet("[[:Default_Ignorable_Code_Point:]-[:Cn:]]")
    spellings = [name[:position] + ch + name[position:] for ch in assigned for position in range(len(name) + 1)]
    for index, ch in enumerate(icu.UnicodeSet("[:Default_Ignorable_Code_Point:]")):
        position = index % (len(name) + 1)
        spellings.append(name[:position] + ch + name[position:])
    return spellings


def _not_recognised(spellings: list[str], account: Account) -> list[str]:
    return [ascii(spelling) for spelling in spellings if not is_same_person(spelling, account)]


@pytest.mark.parametrize("end_user", REVIEW_SPELLINGS_OF_ALICE)
def test_the_reviews_spellings_of_alice_are_alice(end_user):
    assert is_same_person(end_user, Account("alice", "alice@example.com"))
    assert not is_same_person(end_user, Account("bob", "bob@example.com"))


@pytest.mark.parametrize("name", APPROVER_NAMES + [name.upper() for name in APPROVER_NAMES])
def test_every_lookalike_of_every_letter_is_still_the_approver(name):
    spellings = _confusable_spellings(name)
    assert len(spellings) > 10 * len(name)  # the whole table, not a handful
    assert _not_recognised(spellings, Account(name.lower())) == []


@pytest.mark.parametrize("name", APPROVER_NAMES)
def test_an_ignorable_code_point_anywhere_is_still_the_approver(name):
    spellings = _ignorable_spellings(name)
    assert len(spellings) > 4000
    assert _not_recognised(spellings, Account(name)) == []


def test_spaces_do_not_split_a_name():
    # A hair space is all but invisible; any space between letters reads as the name itself (the safe error).
    for spelling in ["al\u200aice", "al ice", "a l i c e", "al\u3000ice"]:
        assert is_same_person(spelling, Account("alice")), ascii(spelling)


@pytest.mark.parametrize(
    ("end_user", "approver"),
    [("alicia", "alice"), ("rob", "bob"), ("olive", "olivia"), ("adan", "adam"), ("gino", "gina"),
     ("\u0430lici\u0430", "alice"), ("r\u043eb", "bob"), ("bobby", "bob"), ("gina2", "gina")],
)  # fmt: skip
def test_genuinely_different_names_are_other_people(end_user, approver):
    assert not is_same_person(end_user, Account(approver, f"{approver}@example.com"))
