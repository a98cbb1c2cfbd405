"""Search input a database cannot store is refused with a clear 400, never a 500 (found by schemathesis)."""

import pytest
from django.urls import reverse

from registry.models import DiscoveryQuery
from tests.runs.factories import grant, make_skill

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize("params", [{"q": "refund\x00"}, {"q": "refund", "namespace": "billing\x00"}])
def test_a_nul_character_in_the_search_is_refused(agent_client, acme, params):
    grant(acme, "billing.*")
    make_skill("billing.refund")
    response = agent_client.get(reverse("registry_api:skill-search"), params)
    assert response.status_code == 400, response.content
    assert response.json()["error"]["code"] == "bad_request"  # console.unsafe_input, before the view
    assert not DiscoveryQuery.objects.exists()


def test_the_same_search_without_it_still_answers(agent_client, acme):
    grant(acme, "billing.*")
    make_skill("billing.refund")
    response = agent_client.get(reverse("registry_api:skill-search"), {"q": "refund"})
    assert response.status_code == 200 and response.json()["results"]
