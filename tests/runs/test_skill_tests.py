"""A manifest's `tests` run against the sandbox on publish and by `manage.py test_skills`; a failure blocks
publishing, stays on the version page, and a malformed test is a manifest error."""

from io import StringIO

import pytest
from django.core.management import CommandError, call_command
from django.urls import reverse

from registry import services
from registry.models import Skill, SkillTestRun, SkillVersion, VersionStatus
from runs import demo_tools
from tests.conftest import login
from tests.runs.test_trials import GOOD, SANDBOX_CALLS, client_for, email_manifest

pytestmark = pytest.mark.django_db

SANDBOX = "python:trials_test.sandbox_send_email"
PASSING = [
    {"name": "a plain reply", "arguments": GOOD, "role": "support", "verdict": "confirm"},
    {"name": "an address is required", "arguments": {**GOOD, "to": "nobody"}, "valid": False, "error_fields": ["to"]},
    {"name": "not for marketing", "arguments": GOOD, "role": "marketing", "verdict": "deny"},
]


def draft(owner, tests, version="1.0.0", **overrides) -> SkillVersion:
    body = email_manifest(version, execution__sandbox=SANDBOX, tests=tests, **overrides)
    skill = Skill.objects.filter(name="support.notify_customer").first()
    return services.create_draft_version(manifest=body, author=owner, skill=skill)


def publish_url(version="1.0.0") -> str:
    return reverse("registry_api:version-publish", args=["support.notify_customer", version])


@pytest.fixture(autouse=True)
def clean_state():
    demo_tools.reset()
    SANDBOX_CALLS.clear()


def test_passing_tests_let_the_version_publish(owner):
    draft(owner, PASSING)
    response = client_for(owner).post(publish_url())
    assert response.status_code == 200, response.content
    assert response.json()["status"] in ("active", "in_review")
    tested = SkillTestRun.objects.get()
    assert tested.passed and tested.trigger == "publish" and tested.ran_by == owner
    assert len(SANDBOX_CALLS) == 1  # the confirm ran against the sandbox; the deny and the invalid one nowhere
    assert demo_tools.outbox() == []


def test_a_failing_test_blocks_publishing_and_stays_on_the_version(owner, client):
    failing = [
        *PASSING,
        {"name": "support may send at once", "arguments": GOOD, "role": "support", "verdict": "allow"},
        {"name": "subject may be empty", "arguments": {**GOOD, "subject": ""}},
    ]
    version = draft(owner, failing)
    response = client_for(owner).post(publish_url())
    assert response.status_code == 400
    errors = response.json()["error"]["errors"]
    assert [(e["path"], e["code"]) for e in errors] == [
        ("$.tests[3]", "skill_test_failed"),
        ("$.tests[4]", "skill_test_failed"),
    ]
    assert "the verdict for support is confirm, not allow" in errors[0]["message"]
    assert "subject" in errors[1]["message"]
    version.refresh_from_db()
    assert version.status == VersionStatus.DRAFT
    assert not SkillTestRun.objects.get().passed
    login(client, owner)
    page = client.get(reverse("trials:try", args=["support.notify_customer", "1.0.0"])).content.decode()
    assert "Publishing is blocked until every test passes." in page
    assert "the verdict for support is confirm, not allow" in page
    # the console's own Publish button says the same and leaves the draft a draft
    client.post(reverse("registry:publish", args=["support.notify_customer", "1.0.0"]))
    skill_page = client.get(reverse("registry:skill", args=["support.notify_customer"])).content.decode()
    assert "support may send at once" in skill_page
    version.refresh_from_db()
    assert version.status == VersionStatus.DRAFT


def test_a_draft_changed_after_its_tests_ran_is_tested_again(owner):
    draft(owner, PASSING)
    client_for(owner).post(reverse("trials:tests", args=["support.notify_customer", "1.0.0"]))
    changed = draft(owner, [{"name": "now failing", "arguments": GOOD, "role": "support", "verdict": "allow"}])
    response = client_for(owner).post(publish_url())
    assert response.status_code == 400
    changed.refresh_from_db()
    assert changed.status == VersionStatus.DRAFT


@pytest.mark.parametrize(
    "tests,path",
    [
        ([{"arguments": GOOD}], "$.tests[0]"),  # no name
        ([{"name": "x", "arguments": GOOD, "verdict": "allow"}], "$.tests[0]"),  # a verdict needs a role
        ([{"name": "x", "arguments": GOOD, "verdict": "maybe", "role": "support"}], "$.tests[0].verdict"),
        ([{"name": "x", "arguments": "to=ada"}], "$.tests[0].arguments"),
        ([{"name": "x", "arguments": GOOD, "expect": "ok"}], "$.tests[0]"),  # unknown key
        ({"name": "x"}, "$.tests"),
    ],
)
def test_a_malformed_test_is_a_manifest_error(owner, tests, path):
    with pytest.raises(services.ManifestInvalid) as refused:
        draft(owner, tests)
    assert [(e["path"], e["code"]) for e in refused.value.errors] == [(path, "schema")]


def test_tests_that_call_need_something_to_call(owner):
    body = email_manifest(tests=PASSING)
    with pytest.raises(services.ManifestInvalid) as refused:
        services.create_draft_version(manifest=body, author=owner)
    assert [(e["path"], e["code"]) for e in refused.value.errors] == [("$.tests", "tests_need_sandbox")]


def test_the_test_skills_command_fails_on_a_failing_test(owner):
    draft(owner, PASSING)
    draft(
        owner, [{"name": "support may send at once", "arguments": GOOD, "role": "support", "verdict": "allow"}], "1.1.0"
    )
    out = StringIO()
    with pytest.raises(CommandError, match="0 of 1 tests passed"):
        call_command("test_skills", "--skill", "support.notify_customer", stdout=out)
    assert "support.notify_customer 1.1.0 (draft)" in out.getvalue()
    assert "FAIL support may send at once" in out.getvalue()
    assert "the verdict for support is confirm, not allow" in out.getvalue()
    out = StringIO()
    call_command("test_skills", "--skill", "support.notify_customer", "--version", "1.0.0", stdout=out)
    assert "PASS a plain reply" in out.getvalue() and "3 of 3 tests passed" in out.getvalue()
    with pytest.raises(CommandError, match="No version with tests"):
        call_command("test_skills", "--skill", "docs.nothing", stdout=StringIO())
    assert SkillTestRun.objects.filter(trigger="command").count() == 2
