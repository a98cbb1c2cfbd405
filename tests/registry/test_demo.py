"""The demo catalog: valid, across namespaces and every effect class, idempotent, in a snapshot."""

import pytest

from airlock.demo import seed_all
from registry.models import Skill, SkillVersion, Snapshot
from registry.snapshots import load_snapshot
from registry.validation import validate_manifest

pytestmark = pytest.mark.django_db


def test_seed_is_valid_complete_and_idempotent():
    seed_all()
    snapshots = Snapshot.objects.count()
    seed_all()
    assert Snapshot.objects.count() == snapshots
    assert Skill.objects.count() == 13  # with the two client-executed skills of the outage run
    assert SkillVersion.objects.count() == 14  # and a draft of the refund skill with a sandbox and tests
    assert {v.effect for v in SkillVersion.objects.all()} == {"read", "draft", "write", "external", "destructive"}
    assert Skill.objects.values("namespace").distinct().count() >= 4
    index = load_snapshot(Snapshot.objects.latest().number)
    assert index.resolve("support.send_email").manifest["execution"]["adapter"] == "python:demo.send_email"
    lookup = index.resolve("orders.lookup_order")
    assert lookup.deprecated and lookup.replacement_name == "orders.get_order"
    assert index.resolve("support.read_inbound_email").manifest["risk"]["untrusted_output"] is True
    for version in SkillVersion.objects.select_related("skill"):
        # Re-validating as a brand new skill would only complain that the name is taken.
        codes = {e["code"] for e in validate_manifest(version.manifest)}
        assert codes <= {"name_taken", "skill_id_taken"}, (version, codes)
