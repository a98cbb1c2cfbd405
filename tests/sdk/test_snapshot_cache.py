"""The signed snapshot cache, against a scripted control plane with a real Ed25519 key."""

import base64
import json

import httpx
import pytest
from airlock_sdk import ControlPlaneUnavailable, SnapshotVerificationError
from airlock_sdk.canonical import canonical_json
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from tests.sdk.fakes import FakeAirlock

REFUND_SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "required": ["order_id", "amount_cents"],
    "properties": {"order_id": {"type": "string"}, "amount_cents": {"type": "integer", "minimum": 1}},
}


@pytest.fixture(autouse=True)
def _no_sleep(monkeypatch):
    monkeypatch.setattr("airlock_sdk.transport.time.sleep", lambda seconds: None)


@pytest.fixture
def key():
    return Ed25519PrivateKey.generate()


def pem(private) -> str:
    return (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )


def snapshot(private, number: int = 4, schema=REFUND_SCHEMA) -> dict:
    skill = {
        "name": "billing.create_refund_request",
        "version": "1.0.0",
        "status": "active",
        "manifest": {"input_schema": schema},
    }
    body = {
        "format": "airlock.snapshot/1",
        "number": number,
        "skills": [skill],
        "audience": {"tenant": "acme", "key_lookup": "test"},
    }  # FakeAirlock's key is ak_test_key
    return {
        "snapshot": body,
        "signature": base64.b64encode(private.sign(canonical_json(body))).decode(),
        "algorithm": "Ed25519",
        "canonicalization": "RFC 8785",
    }


def control_plane(private, served: dict) -> FakeAirlock:
    fake = FakeAirlock()
    fake.on("GET", "/api/v1/snapshots/public-key", httpx.Response(200, json={"public_key_pem": pem(private)}))
    fake.on("GET", "/api/v1/snapshots/latest", httpx.Response(200, json=served, headers={"ETag": '"s4"'}))
    return fake


def test_a_verified_snapshot_is_kept_on_disk_and_trusted_by_the_next_process(key, tmp_path):
    fake = control_plane(key, snapshot(key))
    assert fake.client(tmp_path).refresh_snapshot().number == 4
    offline = FakeAirlock()
    offline.on("GET", "/api/v1/snapshots/latest", httpx.ConnectError("down"))
    later = offline.client(tmp_path)
    assert later.cache.snapshot.number == 4  # loaded from disk, re-verified
    assert later.refresh_snapshot().number == 4 and later.cache.stale


def test_a_304_keeps_the_cached_snapshot(key, tmp_path):
    fake = control_plane(key, snapshot(key))
    airlock = fake.client(tmp_path)
    airlock.refresh_snapshot()
    fake.routes[("GET", "/api/v1/snapshots/latest")] = [httpx.Response(304)]
    assert airlock.refresh_snapshot().number == 4
    assert fake.sent("GET", "/api/v1/snapshots/latest")[-1].headers["If-None-Match"] == '"s4"'


def test_a_tampered_snapshot_is_refused_and_the_last_good_one_stays(key, tmp_path):
    airlock = control_plane(key, snapshot(key)).client(tmp_path)
    airlock.refresh_snapshot()
    forged = snapshot(key, number=5)
    forged["snapshot"]["skills"][0]["manifest"]["input_schema"] = {"type": "object"}  # widened after signing
    airlock.transport.client = httpx.Client(transport=httpx.MockTransport(control_plane(key, forged)))
    with pytest.raises(SnapshotVerificationError):
        airlock.refresh_snapshot()
    assert airlock.cache.snapshot.number == 4
    assert json.loads(airlock.cache.path.read_text())["number"] == 4


def test_a_snapshot_signed_by_another_key_is_refused(key, tmp_path):
    impostor = Ed25519PrivateKey.generate()
    served = snapshot(impostor)
    with pytest.raises(SnapshotVerificationError):
        control_plane(key, served).client(tmp_path).refresh_snapshot()


def test_a_tampered_cache_file_is_ignored(key, tmp_path):
    control_plane(key, snapshot(key)).client(tmp_path).refresh_snapshot()
    [path] = tmp_path.glob("snapshot-*.json")
    data = json.loads(path.read_text())
    data["body"]["skills"][0]["manifest"]["input_schema"] = {"type": "object"}
    path.write_text(json.dumps(data))
    assert control_plane(key, snapshot(key)).client(tmp_path).cache.snapshot is None


def test_no_cache_and_no_control_plane_is_a_clear_error(tmp_path):
    fake = FakeAirlock()
    fake.on("GET", "/api/v1/snapshots/latest", httpx.ConnectError("down"))
    with pytest.raises(ControlPlaneUnavailable):
        fake.client(tmp_path).refresh_snapshot()


def test_arguments_are_validated_locally_against_the_pinned_snapshot(key, tmp_path):
    fake = control_plane(key, snapshot(key))
    fake.on("POST", "/api/v1/runs", httpx.Response(201, json={"run_id": "r-1", "status": "running", "snapshot": 4}))
    airlock = fake.client(tmp_path)
    run = airlock.start_run(end_user="u-1", task="refund")
    [bad] = run.call(
        [{"name": "billing.create_refund_request", "arguments": {"order_id": "o-1", "amount_cents": -5, "note": "x"}}]
    )
    assert bad.error_class == "validation" and bad.local
    assert {field["path"] for field in bad.fields} == {"/amount_cents", "/"}
    assert not fake.sent("POST", "/api/v1/runs/r-1/calls")  # no network hop
