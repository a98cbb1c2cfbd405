import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from traces.redaction import looks_secret, mask_secrets, redact

SECRETS = [
    "sk-proj-abcdefghijklmnop1234567890",
    "sk-ant-api03-abcdefghijklmnopqrstu",
    "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
    "AKIAIOSFODNN7EXAMPLE",
    "xoxb-123456789012-abcdefghijkl",
    "sk_live_abcdefghijklmnop",
    "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U",
    "ak_live_4f9c2e7a1b3d5f6e",
    "pat_0123456789abcdefghij",
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----",
    "AIzaSyA-abcdefghijklmnopqrstuvwxyz01234",
]


@pytest.mark.parametrize("secret", SECRETS)
def test_secrets_are_masked_anywhere_in_a_payload(secret):
    payload = {"note": f"use {secret} please", "list": [secret], "nested": {"deep": [{"x": secret}]}}
    out = json.dumps(redact(payload))
    assert secret not in out
    assert "redacted:" in out


def test_bearer_tokens_and_passwords_in_urls_are_masked():
    text = "Authorization: Bearer abc.def-ghi_jkl012345 and postgres://app:hunter2secret@db/x"
    out = mask_secrets(text)
    assert "abc.def-ghi_jkl012345" not in out and "hunter2secret" not in out
    assert out.startswith("Authorization: Bear")


def test_ordinary_text_is_untouched():
    payload = {"order_id": "ord_123", "amount": 42.5, "ok": True, "note": "Refund for the skis, ask Sam", "n": None}
    assert redact(payload) == payload
    assert not looks_secret("the task was skipped")


def test_schema_marked_fields_become_hash_and_preview():
    schema = {
        "type": "object",
        "properties": {
            "password": {"type": "string", "format": "password"},
            "token": {"type": "string", "writeOnly": True},
            "card": {"type": "object", "x-airlock-sensitive": True},
            "items": {
                "type": "array",
                "items": {"type": "object", "properties": {"ssn": {"x-airlock-sensitive": True}}},
            },
            "name": {"type": "string"},
        },
    }
    out = redact(
        {
            "password": "hunter2",
            "token": "t0k3n",
            "card": {"pan": "4111111111111111"},
            "items": [{"ssn": "123-45-6789"}],
            "name": "Ann",
        },
        schema=schema,
    )
    assert out["name"] == "Ann"
    assert out["password"]["redacted"] is True and out["password"]["preview"] == "hu…"
    assert len(out["password"]["sha256"]) == 64
    assert "4111111111111111" not in json.dumps(out) and "123-45-6789" not in json.dumps(out)
    assert out["items"][0]["ssn"]["redacted"] is True


@pytest.mark.parametrize("classification", ["confidential", "restricted"])
def test_confidential_payloads_are_stored_only_as_hash_and_preview(classification):
    out = redact({"diagnosis": "flu", "patient": "Ann"}, data_classification=classification)
    assert set(out) == {"redacted", "reason", "sha256", "preview"}
    assert "flu" not in json.dumps(out) and out["reason"] == classification


def test_redaction_is_deterministic():
    payload = {"a": SECRETS[0], "b": {"password": "x"}}
    schema = {"properties": {"b": {"properties": {"password": {"writeOnly": True}}}}}
    assert redact(payload, schema=schema) == redact(payload, schema=schema)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=True) | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=20,
)


@settings(max_examples=200, deadline=None)
@given(value=json_values, secret=st.sampled_from(SECRETS), prefix=st.text(max_size=5))
def test_property_no_secret_survives_and_output_is_json(value, secret, prefix):
    payload = {"data": value, "hidden": [prefix + " " + secret]}
    out = redact(payload)
    text = json.dumps(out, allow_nan=False)
    assert secret not in text
    assert redact(payload) == out


@settings(max_examples=200, deadline=None)
@given(value=json_values)
def test_property_idempotent(value):
    once = redact(value)
    assert redact(once) == once


def test_values_under_credential_keys_are_hashed_but_token_counts_are_not():
    out = redact(
        {
            "headers": {"Authorization": "hunter2", "X-Api-Key": "k"},
            "db.password": "pw",
            "gen_ai.usage.input_tokens": 1200,
            "tokens": 5,
            "flag": {"token": True},
        }
    )
    assert out["headers"]["Authorization"]["redacted"] is True and out["headers"]["X-Api-Key"]["redacted"] is True
    assert out["db.password"]["redacted"] is True
    assert out["gen_ai.usage.input_tokens"] == 1200 and out["tokens"] == 5 and out["flag"] == {"token": True}


def test_card_numbers_are_masked_only_when_luhn_valid():
    out = mask_secrets("card 4242 4242 4242 4242 and order 1234567890123")
    assert "4242 4242 4242 4242" not in out and "card…4242" in out
    assert "1234567890123" in out  # not a valid card number: an ordinary id stays readable


def test_a_uuid_whose_leading_digits_pass_luhn_is_an_id_not_a_card():
    run_id = "53586182-3078-4510-b4ae-048a5b8beef9"  # a real run's id, masked once, its audit row then failed
    payload = {"run_id": run_id, "note": f"run {run_id.upper()}"}
    assert redact(payload) == payload
    assert "card…4242" in mask_secrets(f"{run_id} paid with 4242-4242-4242-4242")


@pytest.mark.parametrize(
    "text,secret",
    [
        ("db password=hunter2-Quokka ok", "hunter2-Quokka"),
        ('{"password": "correct horse battery"}', "correct horse battery"),
        ("token: Mango55Paddle", "Mango55Paddle"),
        ("GET /x?api_key=Zebra77Quartz&q=1", "Zebra77Quartz"),
        ("Authorization: Bearer zq8Vt3LmX2pR7sK9wN4b", "zq8Vt3LmX2pR7sK9wN4b"),
        ("Authorization: Basic dXNlcjpwYXNz", "dXNlcjpwYXNz"),
        ("AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG", "wJalrXUtnFEMI/K7MDENG"),
        ("client_secret='s3cr3t value'", "s3cr3t value"),
    ],
)
def test_credentials_written_inline_are_masked_and_the_key_stays(text, secret):
    out = mask_secrets(text)
    assert secret not in out and "[redacted:" in out
    assert mask_secrets(out) == out  # masking twice changes nothing


@pytest.mark.parametrize(
    "text",
    ["input_tokens: 532", "the secretary: Ann", "Bearer: none", "keys are in the drawer", "ratio=3:2 and passes=4"],
)
def test_text_that_only_mentions_credentials_is_kept(text):
    assert mask_secrets(text) == text


@pytest.mark.parametrize(
    "text", ["password=" * 20_000, "token: " * 20_000, "a-" * 50_000, "token_" + "a" * 100_000, "x" * 200_000 + "="]
)
def test_inline_credentials_take_linear_time(text):
    import time

    started = time.perf_counter()
    mask_secrets(text)
    assert time.perf_counter() - started < 2.0


def test_tool_results_are_redacted_by_output_schema_key_and_pattern_before_shaping():
    from runs.shaping import shape

    schema = {
        "type": "object",
        "properties": {
            "vault_value": {"type": "string", "writeOnly": True},
            "recovery": {"type": "object", "x-airlock-sensitive": True},
            "pin": {"type": "string", "format": "password"},
        },
    }
    content = {
        "note": f"here {SECRETS[2]}",
        "vault_value": "plain-looking",
        "recovery": {"code": "x1"},
        "pin": "1234",
        "access_token": "opaque-but-a-credential",
        "n": 3,
    }
    shaped = shape(content, 16384, output_schema=schema)
    text = json.dumps(shaped.content)
    for value in (SECRETS[2], "plain-looking", '"x1"', '"1234"', "opaque-but-a-credential"):
        assert value not in text
    assert shaped.content["n"] == 3 and shaped.content["note"].startswith("here ghp_")
    assert shaped.size == len(json.dumps(shaped.content, separators=(",", ":"), ensure_ascii=False).encode())
