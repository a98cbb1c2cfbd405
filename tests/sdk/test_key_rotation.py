"""The SDK through a key rotation, against a live Airlock: the agent still on the old key keeps verifying
its snapshots and calling in the grace period, the agent on the new key verifies snapshots signed for its
new key from the same cache directory, and after the cut-off the old key gets a typed 401."""

from __future__ import annotations

import httpx
import pytest
from airlock_sdk import Airlock, AuthenticationError, ClientSkillRegistry, Ok

from console.services import cut_off_old_key, rotate_agent_key

ORDERS = {"call_id": "orders", "name": "customer.list_orders", "arguments": {"customer_id": "c-100"}}


def _client(server, key: str, cache_dir) -> Airlock:
    return Airlock(
        server.url,
        key,
        cache_dir=cache_dir,
        retries=1,
        client_skills=ClientSkillRegistry(),
        http_client=httpx.Client(timeout=40),
    )


def test_both_keys_verify_their_own_snapshots_in_the_grace_period_and_only_the_new_one_after(
    asgi_live_server, catalog, agent_and_key, tenant_admin, tmp_path
):
    agent, old_key = agent_and_key
    old = _client(asgi_live_server, old_key, tmp_path)
    try:
        assert old.refresh_snapshot().body["audience"]["key_lookup"] == agent.key_lookup
        run = old.start_run(end_user="customer:c-100", task="orders")
        agent, new_key = rotate_agent_key(agent=agent, by=tenant_admin)

        assert old.refresh_snapshot().body["audience"]["key_lookup"] == agent.previous_key_lookup
        assert isinstance(run.call([ORDERS])[0], Ok) and not old.snapshot_refusals
        new = _client(asgi_live_server, new_key, tmp_path)  # the same cache directory as the old key's
        try:
            assert new.refresh_snapshot().body["audience"]["key_lookup"] == agent.key_lookup
            assert "customer__list_orders" in [tool["name"] for tool in new.tools(format="openai")]
            assert not new.snapshot_refusals

            cut_off_old_key(agent=agent, by=tenant_admin)
            with pytest.raises(AuthenticationError) as refused:
                run.call([{**ORDERS, "call_id": "late"}])
            assert refused.value.code == "replaced_key"
            assert isinstance(new.start_run(end_user="customer:c-100", task="orders").call([ORDERS])[0], Ok)
        finally:
            new.close()
    finally:
        old.close()
