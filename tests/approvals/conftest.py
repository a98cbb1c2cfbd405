import pytest

from tests.approvals import worker_tools


@pytest.fixture(autouse=True)
def _downstream(tmp_path, monkeypatch):
    """Each test starts with nothing received by the downstream and a ledger of its own."""
    monkeypatch.setenv("AIRLOCK_TEST_LEDGER", str(tmp_path / "ledger.jsonl"))
    worker_tools.reset()
    yield
    worker_tools.reset()


@pytest.fixture
def executions() -> list[dict]:
    """What the downstream refund tool really received: the arguments of every invocation, in order.

    Recorded at the edge (tests/approvals/worker_tools.py) behind the real gate, resume task and
    executor; a repeated delivery appears here even when the downstream's idempotency key absorbs it.
    """
    return worker_tools.received
