"""Drafts, publication with second-person review, deprecation and retirement, and who may do them."""

from datetime import timedelta

import pytest
from django.core.exceptions import PermissionDenied
from django.utils import timezone

from registry.models import Snapshot, VersionStatus
from registry.services import (
    ManifestInvalid,
    approve_version,
    create_draft_version,
    deprecate_skill,
    publish_version,
    retire_skill,
)
from registry.snapshots import load_snapshot
from runs.adapters.python import register
from tests.conftest import make_user
from tests.registry.factories import manifest

pytestmark = pytest.mark.django_db


@pytest.fixture
def teammate(owner_team):
    user = make_user("teammate")
    owner_team.members.add(user)
    return user


def _publish(owner, body=None, skill=None):
    draft = create_draft_version(manifest=body or manifest(), author=owner, skill=skill)
    return publish_version(version=draft, user=owner)


def test_draft_then_publish_makes_it_resolvable_in_a_new_snapshot(owner):
    draft = create_draft_version(manifest=manifest(), author=owner)
    assert draft.status == VersionStatus.DRAFT
    assert Snapshot.objects.count() == 0
    published = publish_version(version=draft, user=owner)
    assert published.status == VersionStatus.ACTIVE
    index = load_snapshot(Snapshot.objects.latest().number)
    assert index.resolve("docs.search_documentation").version == "1.0.0"


def test_invalid_manifest_is_refused_with_paths(owner):
    with pytest.raises(ManifestInvalid) as caught:
        create_draft_version(
            manifest=manifest(**{"risk__effect": "destructive", "execution__max_attempts": 1}), author=owner
        )
    assert [(e["path"], e["code"]) for e in caught.value.errors] == [("$.risk.approval", "destructive_needs_approval")]


def test_outsider_cannot_create_or_publish(owner, outsider, viewer):
    with pytest.raises(PermissionDenied):
        create_draft_version(manifest=manifest(), author=outsider)
    draft = create_draft_version(manifest=manifest(), author=owner)
    with pytest.raises(PermissionDenied):
        publish_version(version=draft, user=viewer)


def test_published_version_cannot_be_resubmitted(owner):
    version = _publish(owner)
    with pytest.raises(ManifestInvalid) as caught:
        create_draft_version(manifest=manifest(version="1.0.0"), author=owner, skill=version.skill)
    assert ("$.version", "version_not_greater") in [(e["path"], e["code"]) for e in caught.value.errors]


def test_raising_the_effect_needs_another_persons_review(owner, teammate, platform_admin):
    first = _publish(owner)
    body = manifest(version="1.1.0", **{"risk__effect": "write"})
    second = publish_version(version=create_draft_version(manifest=body, author=owner, skill=first.skill), user=owner)
    assert second.status == VersionStatus.IN_REVIEW
    assert second.review_reasons == ["effect raised from read to write"]
    assert load_snapshot(Snapshot.objects.latest().number).resolve("docs.search_documentation").version == "1.0.0"
    with pytest.raises(PermissionDenied):
        approve_version(version=second, user=owner)  # never the author
    approved = approve_version(version=second, user=teammate)
    assert approved.status == VersionStatus.ACTIVE and approved.reviewer == teammate
    assert load_snapshot(Snapshot.objects.latest().number).resolve("docs.search_documentation").version == "1.1.0"


def test_widening_permissions_needs_review_a_platform_admin_may_give(owner, platform_admin, outsider):
    body = manifest(**{"permissions__allowed_tenants": ["acme"]})
    first = _publish(owner, body)
    wider = manifest(
        version="1.0.1",
        **{
            "permissions__allowed_tenants": ["acme", "globex"],
            "permissions__allowed_agent_roles": ["support", "developer", "billing"],
        },
    )
    version = publish_version(version=create_draft_version(manifest=wider, author=owner, skill=first.skill), user=owner)
    assert version.review_reasons == ["allowed_tenants widened: globex", "allowed_agent_roles widened: billing"]
    with pytest.raises(PermissionDenied):
        approve_version(version=version, user=outsider)
    assert approve_version(version=version, user=platform_admin).status == VersionStatus.ACTIVE


@register("lifecycle.search_pages", effect="read")
def search_pages(*, arguments: dict, context) -> dict:
    return {"results": []}


def test_deprecate_with_replacement_and_sunset_then_retire(owner):
    old = _publish(owner)
    new = _publish(owner, manifest("docs.search_pages", execution__adapter="python:lifecycle.search_pages"))
    sunset = timezone.now() + timedelta(days=30)
    deprecate_skill(skill=old.skill, user=owner, replacement=new.skill, sunset_at=sunset)
    index = load_snapshot(Snapshot.objects.latest().number)
    resolved = index.resolve("docs.search_documentation", "1.0.0")
    assert resolved.deprecated and resolved.replacement_name == "docs.search_pages"
    assert [e["name"] for e in index.current_entries()] == ["docs.search_pages"]
    by_name = index.resolve("docs.search_documentation")  # no version: still callable, flagged
    assert by_name.deprecated and by_name.replacement == "docs.search_pages"
    retire_skill(skill=old.skill, user=owner)
    assert load_snapshot(Snapshot.objects.latest().number).resolve("docs.search_documentation", "1.0.0") is None


def test_replacement_must_be_active(owner):
    old = _publish(owner)
    draft_only = create_draft_version(manifest=manifest("docs.search_pages"), author=owner)
    with pytest.raises(ManifestInvalid) as caught:
        deprecate_skill(skill=old.skill, user=owner, replacement=draft_only.skill)
    assert caught.value.errors[0]["code"] == "replacement_not_active"


def test_only_owners_or_platform_admin_deprecate_and_retire(owner, viewer, platform_admin):
    version = _publish(owner)
    with pytest.raises(PermissionDenied):
        deprecate_skill(skill=version.skill, user=viewer)
    with pytest.raises(PermissionDenied):
        retire_skill(skill=version.skill, user=viewer)
    retire_skill(skill=version.skill, user=platform_admin)
    assert version.skill.versions.get().status == VersionStatus.RETIRED
