"""Signed snapshots: numbering, content, signature verification, tampering, resolution."""

import json
from datetime import timedelta

import pytest
from django.utils import timezone

from lib import signing
from registry.models import ImmutableVersionError, SkillVersion, Snapshot
from registry.snapshots import latest_snapshot, load_snapshot, publish_snapshot, verify_snapshot
from tests.registry.factories import make_version

pytestmark = pytest.mark.django_db


def test_numbers_are_monotonic_and_latest_creates_the_first(owner_team):
    assert Snapshot.objects.count() == 0
    first = latest_snapshot()
    assert first.number == 1
    second = publish_snapshot(reason="test")
    assert second.number == 2
    assert latest_snapshot().number == 2


def test_snapshot_lists_active_and_deprecated_versions_but_not_drafts_or_retired(owner_team):
    make_version(team=owner_team, version="1.0.0", status="deprecated")
    make_version(team=owner_team, version="1.1.0", status="active")
    make_version(team=owner_team, version="2.0.0", status="draft")
    make_version(team=owner_team, name="admin.old_tool", status="retired")
    body = publish_snapshot(reason="test").body
    assert [(s["name"], s["version"], s["status"]) for s in body["skills"]] == [
        ("docs.search_documentation", "1.0.0", "deprecated"),
        ("docs.search_documentation", "1.1.0", "active"),
    ]
    entry = body["skills"][1]
    assert entry["manifest"]["risk"]["effect"] == "read"
    assert entry["manifest"]["status"] == "active"
    assert entry["skill_id"] == "skl_docs_search_documentation"


def test_signature_verifies_with_public_key_and_tampering_fails(owner_team):
    make_version(team=owner_team)
    snapshot = publish_snapshot(reason="test")
    public = signing.public_key_pem()
    assert verify_snapshot(snapshot.body, snapshot.signature, public)
    # The body round-trips through JSON text, as an agent receives it.
    assert verify_snapshot(json.dumps(snapshot.body), snapshot.signature, public)
    tampered = json.loads(json.dumps(snapshot.body))
    tampered["skills"][0]["manifest"]["risk"]["approval"] = "not_required"
    tampered["skills"][0]["effect"] = "destructive"
    assert not verify_snapshot(tampered, snapshot.signature, public)
    assert not verify_snapshot(snapshot.body, "A" * 88, public)


def test_resolve_exact_active_deprecated_and_unknown(owner_team):
    make_version(team=owner_team, version="1.0.0", status="deprecated")
    make_version(team=owner_team, version="1.1.0", status="active")
    index = load_snapshot(publish_snapshot(reason="t").number)
    assert index.resolve("docs.search_documentation").version == "1.1.0"
    old = index.resolve("docs.search_documentation", "1.0.0")
    assert old.deprecated and old.status == "deprecated"
    assert index.resolve("docs.search_documentation", "9.9.9") is None
    assert index.resolve("nope.tool") is None


def test_deprecated_version_stops_resolving_after_sunset(owner_team):
    version = make_version(team=owner_team, status="deprecated")
    version.sunset_at = timezone.now() + timedelta(days=1)
    version.save()
    index = load_snapshot(publish_snapshot(reason="t").number)
    assert index.resolve("docs.search_documentation", "1.0.0") is not None
    later = timezone.now() + timedelta(days=2)
    assert index.resolve("docs.search_documentation", "1.0.0", now=later) is None
    assert index.resolve("docs.search_documentation", now=later) is None


def test_load_snapshot_is_cached_per_process(owner_team, django_assert_num_queries):
    make_version(team=owner_team)
    number = publish_snapshot(reason="t").number
    first = load_snapshot(number)
    with django_assert_num_queries(1):
        assert load_snapshot(number) is first


def test_published_manifest_cannot_change_in_the_model_layer(owner_team):
    version = make_version(team=owner_team)
    version = SkillVersion.objects.get(pk=version.pk)
    version.manifest = {**version.manifest, "description": "changed"}
    with pytest.raises(ImmutableVersionError):
        version.save()
    with pytest.raises(ImmutableVersionError):
        SkillVersion.objects.filter(pk=version.pk).update(manifest={})
    draft = make_version(team=owner_team, version="2.0.0", status="draft")
    draft = SkillVersion.objects.get(pk=draft.pk)
    draft.manifest = {**draft.manifest, "description": "fine while a draft"}
    draft.save()


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_concurrent_publishers_get_distinct_consecutive_numbers(owner_team):
    import threading

    from django.db import connection

    make_version(team=owner_team)
    errors: list[Exception] = []

    def publish() -> None:
        try:
            publish_snapshot(reason="concurrent")
        except Exception as exc:  # collected and asserted below
            errors.append(exc)
        finally:
            connection.close()

    threads = [threading.Thread(target=publish) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert sorted(Snapshot.objects.values_list("number", flat=True)) == list(range(1, 9))
