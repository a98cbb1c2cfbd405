"""Operator commands: create_agent and revoke_agent, and the idempotent seed_demo."""

from io import StringIO

import pytest
from django.contrib.auth import get_user_model
from django.core.management import CommandError, call_command

from console.models import Agent, Membership, PersonalAccessToken, Team, Tenant

pytestmark = pytest.mark.django_db


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, stdout=out)
    return out.getvalue()


def test_create_agent_prints_a_working_key_once(acme):
    output = run("create_agent", "--tenant", "acme", "--name", "ops-bot", "--role", "support")
    key = output.strip().splitlines()[-1]
    agent = Agent.objects.get(tenant=acme, name="ops-bot")
    assert agent.role == "support" and agent.key_matches(key)
    assert key not in (agent.key_hash, agent.key_lookup)


def test_create_agent_refuses_an_unknown_tenant_or_a_taken_name(acme, agent):
    with pytest.raises(CommandError, match="No tenant with slug 'nowhere'"):
        run("create_agent", "--tenant", "nowhere", "--name", "x", "--role", "support")
    with pytest.raises(CommandError, match="already has an agent called 'support-bot'"):
        run("create_agent", "--tenant", "acme", "--name", "support-bot", "--role", "support")
    assert Agent.objects.count() == 1


def test_revoke_agent_by_name_or_lookup(agent_and_key):
    agent, key = agent_and_key
    assert "Revoked agent acme/support-bot" in run("revoke_agent", "--tenant", "acme", "--name", "support-bot")
    agent.refresh_from_db()
    assert agent.is_revoked
    assert "already revoked" in run("revoke_agent", "--lookup", key.split("_")[1])


def test_revoke_agent_needs_a_known_agent(acme):
    with pytest.raises(CommandError, match="Give --tenant and --name, or --lookup"):
        run("revoke_agent", "--tenant", "acme")
    with pytest.raises(CommandError, match="No such agent"):
        run("revoke_agent", "--tenant", "acme", "--name", "ghost")


def counts() -> dict[str, int]:
    return {
        "tenants": Tenant.objects.count(),
        "users": get_user_model().objects.count(),
        "memberships": Membership.objects.count(),
        "teams": Team.objects.count(),
        "team_members": Team.members.through.objects.count(),
        "agents": Agent.objects.count(),
        "tokens": PersonalAccessToken.objects.count(),
    }


def test_seed_demo_is_idempotent_and_prints_keys_only_the_first_time():
    first = run("seed_demo")
    after_first = counts()
    second = run("seed_demo")
    assert counts() == after_first
    assert after_first["tenants"] == 2 and after_first["agents"] >= 3
    assert "New agent keys" in first and "ak_" in first
    assert "ak_" not in second and "Agents already exist" in second
    for username in ("alice", "adam", "olivia", "gina"):
        assert username in first
    assert get_user_model().objects.get(username="alice").check_password("airlock-demo")


def test_seed_demo_printed_keys_work():
    output = run("seed_demo")
    keys = [line.split()[-1] for line in output.splitlines() if " ak_" in line]
    assert keys
    for key in keys:
        lookup = key.split("_")[1]
        assert Agent.objects.get(key_lookup=lookup).key_matches(key)


def test_serve_names_its_process_model_then_ends_with_the_logins_and_keys_framed(settings):
    from airlock.management.commands.serve import Command

    settings.REDIS_URL = ""
    command = Command(stdout=StringIO())
    assert command._model(production=False).startswith("embedded: one uvicorn process")
    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    assert "(--dev)" in command._model(production=False)
    assert "Granian calls 8 threads high" in command._model(production=True)
    out = StringIO()
    Command(stdout=out)._ready("http://127.0.0.1:8011", demo=True, new_keys={"acme/support-bot": "ak_x_y"})
    lines = out.getvalue().splitlines()
    assert lines[0] == lines[-1] == "-" * 78
    assert "http://127.0.0.1:8011/" in lines[1] and "'airlock-demo'" in lines[2]
    for username in ("alice", "bob", "olivia", "adam", "gina", "root"):
        assert any(line.startswith(f"  {username}") for line in lines)
    assert "shown this once" in out.getvalue() and "  acme/support-bot     ak_x_y" in lines
    assert "snapshot signing key" in out.getvalue()


def test_serve_with_redis_and_no_nginx_refuses_and_says_how_to_get_it(settings, monkeypatch):
    from airlock.management.commands import serve

    settings.REDIS_URL = "redis://127.0.0.1:6379/0"
    monkeypatch.setattr(serve, "front_door_command", lambda *args, **kwargs: None)
    with pytest.raises(CommandError, match=r"apt-get install nginx-light.*manage.py serve --dev"):
        call_command("serve", stdout=StringIO())
