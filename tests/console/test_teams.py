"""Teams in the console: maintainers add and remove teammates; other members read; everyone else sees nothing."""

import pytest
from django.core.exceptions import PermissionDenied
from django.urls import reverse

from console import services
from console.models import MembershipEvent, Team
from tests.conftest import login, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def maintainer(owner, owner_team):
    owner_team.maintainers.add(owner)
    return owner


@pytest.fixture
def teammate(owner_team):
    user = make_user("teammate")
    owner_team.members.add(user)
    return user


def test_a_maintainer_adds_and_removes_a_teammate_and_the_log_says_so(client, maintainer, owner_team, viewer):
    login(client, maintainer)
    response = client.post(reverse("console:team_member_add", args=[owner_team.slug]), {"username": "viewer"})
    assert response.status_code == 302
    assert owner_team.members.filter(pk=viewer.pk).exists()
    client.post(reverse("console:team_member_remove", args=[owner_team.slug, viewer.pk]))
    assert not owner_team.members.filter(pk=viewer.pk).exists()
    actions = list(MembershipEvent.objects.filter(team=owner_team).values_list("action", "member_label", "actor_label"))
    assert actions == [("removed", "viewer", "owner"), ("added", "viewer", "owner")]


def test_an_unknown_username_is_a_clear_400(client, maintainer, owner_team):
    login(client, maintainer)
    response = client.post(reverse("console:team_member_add", args=[owner_team.slug]), {"username": "nobody-here"})
    assert response.status_code == 400 and "No account has the username" in response.content.decode()


def test_a_non_maintainer_sees_the_team_read_only_and_changes_nothing(client, maintainer, teammate, owner_team, viewer):
    login(client, teammate)
    page = client.get(reverse("console:team_detail", args=[owner_team.slug]))
    assert page.status_code == 200 and "read-only" in page.content.decode()
    assert 'id="teammate-form"' not in page.content.decode()
    assert (
        client.post(reverse("console:team_member_add", args=[owner_team.slug]), {"username": "viewer"}).status_code
        == 403
    )
    assert client.post(reverse("console:team_member_remove", args=[owner_team.slug, maintainer.pk])).status_code == 403
    maintainer_url = reverse("console:team_maintainer", args=[owner_team.slug, teammate.pk])
    assert client.post(maintainer_url, {"maintainer": "1"}).status_code == 403
    assert set(owner_team.members.values_list("username", flat=True)) == {"owner", "teammate"}
    assert list(owner_team.maintainers.values_list("username", flat=True)) == ["owner"]


def test_someone_outside_the_team_gets_404_everywhere(client, maintainer, owner_team, outsider, tenant_admin):
    for person in (outsider, tenant_admin):  # a tenant admin is no team's maintainer
        login(client, person)
        assert client.get(reverse("console:team_detail", args=[owner_team.slug])).status_code == 404
        response = client.post(
            reverse("console:team_member_add", args=[owner_team.slug]), {"username": person.username}
        )
        assert response.status_code == 404
        assert (
            client.post(reverse("console:team_member_remove", args=[owner_team.slug, maintainer.pk])).status_code == 404
        )
        assert "support-tools" not in client.get(reverse("console:team_list")).content.decode()
    assert list(owner_team.members.values_list("username", flat=True)) == ["owner"]


def test_the_last_maintainer_cannot_be_removed_or_demoted(client, maintainer, teammate, owner_team):
    login(client, maintainer)
    client.post(reverse("console:team_member_remove", args=[owner_team.slug, maintainer.pk]))
    client.post(reverse("console:team_maintainer", args=[owner_team.slug, maintainer.pk]), {"maintainer": "0"})
    assert owner_team.maintainers.filter(pk=maintainer.pk).exists()
    client.post(reverse("console:team_maintainer", args=[owner_team.slug, teammate.pk]), {"maintainer": "1"})
    client.post(reverse("console:team_maintainer", args=[owner_team.slug, maintainer.pk]), {"maintainer": "0"})
    assert list(owner_team.maintainers.values_list("username", flat=True)) == ["teammate"]


def test_removing_a_teammate_who_is_not_in_the_team_is_404(client, maintainer, owner_team, viewer):
    login(client, maintainer)
    assert client.post(reverse("console:team_member_remove", args=[owner_team.slug, viewer.pk])).status_code == 404


def test_a_maintainer_of_one_team_cannot_change_another(client, maintainer, owner_team):
    other = Team.objects.create(slug="billing-platform", name="Billing")
    other.members.add(maintainer)  # a member there, not its maintainer
    login(client, maintainer)
    response = client.post(reverse("console:team_member_add", args=[other.slug]), {"username": "owner"})
    assert response.status_code == 403


def test_platform_admin_creates_a_team_with_its_first_maintainer(client, platform_admin, viewer, owner):
    login(client, platform_admin)
    response = client.post(
        reverse("console:team_list"), {"name": "Billing", "slug": "billing-x", "maintainer": "viewer"}
    )
    assert response.status_code == 302
    team = Team.objects.get(slug="billing-x")
    assert list(team.maintainers.all()) == [viewer] and list(team.members.all()) == [viewer]
    login(client, owner)
    assert (
        client.post(reverse("console:team_list"), {"name": "E", "slug": "evil", "maintainer": "owner"}).status_code
        == 403
    )
    assert not Team.objects.filter(slug="evil").exists()


def test_services_refuse_a_non_maintainer_whatever_calls_them(owner_team, teammate, viewer):
    with pytest.raises(PermissionDenied):
        services.add_teammate(team=owner_team, user=viewer, by=teammate)


def test_the_team_page_costs_the_same_queries_with_more_teammates(
    client, maintainer, owner_team, django_assert_max_num_queries
):
    login(client, maintainer)
    url = reverse("console:team_detail", args=[owner_team.slug])
    with django_assert_max_num_queries(20) as few:
        client.get(url)
    for n in range(8):
        services.add_teammate(team=owner_team, user=make_user(f"mate{n}"), by=maintainer)
    with django_assert_max_num_queries(len(few.captured_queries)):
        assert client.get(url).status_code == 200
