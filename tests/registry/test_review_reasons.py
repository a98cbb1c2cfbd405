"""`registry.review.reasons`: which manifest changes need a second person, in the words the reviewer reads."""

from __future__ import annotations

import pytest

from registry.review import field_changes, reasons
from tests.registry.factories import manifest


def _with(**overrides) -> dict:
    return manifest(version="1.0.1", **overrides)


@pytest.mark.parametrize(
    ("old", "new", "expected"),
    [
        (
            {},
            {"execution__adapter": "https://crm.example.com/p"},
            ["calls now leave Airlock: python:demo.search_documentation → https://crm.example.com"],
        ),
        (
            {"execution__adapter": "https://crm.example.com/p"},
            {"execution__adapter": "https://crm.example.com/q"},
            ["adapter changed from https://crm.example.com/p to https://crm.example.com/q"],
        ),
        (
            {"execution__adapter": "https://crm.example.com/p"},
            {"execution__adapter": "https://crm.example.com.evil/p"},
            ["adapter host changed from https://crm.example.com to https://crm.example.com.evil"],
        ),
        (
            {"execution__adapter": "mcp://desk/a"},
            {"execution__adapter": "mcp://other/a"},
            ["adapter host changed from mcp://desk to mcp://other"],
        ),
        ({"execution__credential": "a"}, {"execution__credential": "b"}, ["credential changed from a to b"]),
        ({"execution__credential": "a"}, {}, []),  # dropping a credential gives up authority
        (
            {},
            {"execution__job_status": "https://x.example/{job_id}"},
            ["execution.job_status changed from none to https://x.example/{job_id}"],
        ),
        ({"risk__untrusted_output": False}, {"risk__untrusted_output": True}, []),  # stricter: no review
        ({}, {"execution__timeout_ms": 9000, "description": "Changed words, same behaviour. " * 3}, []),
    ],
    ids=[
        "python to http",
        "same host, other path",
        "look-alike host",
        "other mcp server",
        "credential swapped",
        "credential dropped",
        "job status added",
        "output marked untrusted",
        "unreviewed fields",
    ],
)
def test_reasons(old, new, expected):
    assert reasons(manifest(**old), _with(**{**old, **new})) == expected


def test_field_changes_list_old_and_new_values_and_mark_the_reviewed_ones():
    old = manifest(**{"execution__adapter": "https://crm.example.com/p"})
    new = _with(
        **{
            "execution__adapter": "https://evil.example/c",
            "execution__timeout_ms": 9000,
            "permissions__allowed_tenants": ["acme"],
        }
    )
    changes = {c.path: (c.old, c.new, c.flagged) for c in field_changes(old, new)}
    assert changes == {
        "$.execution.adapter": ("https://crm.example.com/p", "https://evil.example/c", True),
        "$.execution.timeout_ms": ("5000", "9000", False),
        "$.permissions.allowed_tenants": ("*", "acme", False),  # narrowed: shown, not a reason
    }
