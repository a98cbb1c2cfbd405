"""Personal access tokens: approvers create them for bots and scripts, and revoke them."""

from datetime import timedelta

import pytest
from django.urls import reverse
from django.utils import timezone
from rest_framework.test import APIRequestFactory

from console.api_auth import AgentKeyAuthentication
from console.models import PersonalAccessToken
from console.services import create_personal_token
from tests.conftest import login

pytestmark = pytest.mark.django_db


def test_creating_a_token_shows_it_once_and_it_authenticates_as_the_user(client, approver):
    login(client, approver)
    response = client.post(
        reverse("console:token_list"), {"name": "slack-bot", "scopes": ["read", "approve"], "expires_in_days": 7}
    )
    assert response.status_code == 200
    assert "no-store" in response["Cache-Control"]
    key = response.context["key"]
    assert key.startswith("pat_") and key in response.content.decode()
    token = PersonalAccessToken.objects.get(user=approver)
    assert token.name == "slack-bot" and key not in token.key_hash
    assert token.scopes == ["approve", "read"]
    assert abs((token.expires_at - token.created_at) - timedelta(days=7)) < timedelta(seconds=1)
    assert "approve, read" in response.content.decode() and f"{token.expires_at:%Y-%m-%d}" in response.content.decode()
    listing = client.get(reverse("console:token_list"))
    assert "slack-bot" in listing.content.decode() and key not in listing.content.decode()
    request = APIRequestFactory().get("/", HTTP_AUTHORIZATION=f"Bearer {key}")
    user, pat = AgentKeyAuthentication().authenticate(request)
    assert user == approver and pat == token
    token.refresh_from_db()
    assert token.last_used_at is not None


def test_a_token_needs_a_name(client, approver):
    login(client, approver)
    response = client.post(reverse("console:token_list"), {"name": "", "scopes": ["read"], "expires_in_days": 7})
    assert response.status_code == 200 and "key" not in response.context
    assert not PersonalAccessToken.objects.exists()


def test_the_form_offers_scopes_and_a_bounded_lifetime(client, approver, settings):
    settings.AIRLOCK_TOKEN_DEFAULT_DAYS, settings.AIRLOCK_TOKEN_MAX_DAYS = 30, 90
    login(client, approver)
    page = client.get(reverse("console:token_list")).content.decode()
    assert 'name="scopes" value="read"' in page and 'name="scopes" value="approve"' in page
    assert 'name="expires_in_days"' in page and 'value="30"' in page and 'max="90"' in page
    for bad in (
        {"name": "x", "scopes": ["read"], "expires_in_days": 91},  # longer than allowed
        {"name": "x", "scopes": [], "expires_in_days": 7},  # no scope
        {"name": "x", "scopes": ["admin"], "expires_in_days": 7},  # no such scope
        {"name": "x", "scopes": ["read"], "expires_in_days": 0},
    ):
        response = client.post(reverse("console:token_list"), bad)
        assert response.status_code == 200 and "key" not in response.context, bad
    assert not PersonalAccessToken.objects.exists()
    with pytest.raises(ValueError):
        create_personal_token(user=approver, name="x", expires_in=timedelta(days=91))


def test_the_list_shows_each_tokens_scopes_expiry_and_state(client, approver):
    create_personal_token(user=approver, name="reader", scopes=["read"])
    expired, _ = create_personal_token(user=approver, name="old")
    PersonalAccessToken.objects.filter(pk=expired.pk).update(expires_at=timezone.now() - timedelta(minutes=1))
    login(client, approver)
    page = client.get(reverse("console:token_list")).content.decode()
    assert "reader" in page and ">read<" in page and "expired" in page


def test_token_pages_refuse_other_methods_and_anonymous_visitors(client, approver):
    assert client.get(reverse("console:token_list")).status_code == 302
    login(client, approver)
    assert client.put(reverse("console:token_list")).status_code == 405
    token, _ = create_personal_token(user=approver, name="cli")
    assert client.get(reverse("console:token_revoke", args=[token.pk])).status_code == 405


def test_revoking_a_token_stops_it(client, approver):
    token, key = create_personal_token(user=approver, name="cli")
    login(client, approver)
    assert client.post(reverse("console:token_revoke", args=[token.pk])).status_code == 302
    token.refresh_from_db()
    assert token.revoked_at is not None


def test_nobody_else_can_revoke_a_users_token(client, approver, second_approver, outsider):
    token, _ = create_personal_token(user=approver, name="cli")
    for other in (second_approver, outsider):
        login(client, other)
        assert client.post(reverse("console:token_revoke", args=[token.pk])).status_code == 404
    token.refresh_from_db()
    assert token.revoked_at is None
