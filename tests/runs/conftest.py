import pytest
from django.urls import reverse

from runs import demo_tools
from runs.adapters.python import register


@pytest.fixture(autouse=True)
def _fresh_demo_data():
    demo_tools.reset()
    yield
    demo_tools.reset()


@register("test.echo", effect="read")
def echo(*, arguments, context):
    return {"echo": arguments}


@register("test.boom", effect="read")
def boom(*, arguments, context):
    raise RuntimeError("secret internal detail: db password is hunter2")


def start_run(agent_client, **extra) -> dict:
    response = agent_client.post(
        reverse("runs_api:run_create"),
        {"end_user": "u-1", "end_user_roles": ["customer"], "task": "help", **extra},
        format="json",
    )
    assert response.status_code == 201, response.content
    return response.json()


def post_calls(agent_client, run_id: str, calls: list[dict]):
    return agent_client.post(reverse("runs_api:run_calls", args=[run_id]), {"calls": calls}, format="json")


def call(call_id: str, name: str, arguments: dict | None = None, **extra) -> dict:
    return {"call_id": call_id, "name": name, "arguments": arguments or {}, **extra}
