"""Scripted "models": each scenario proposes tool calls through the SDK the way a model would.

No language model is involved: the script decides the next call from the previous results,
which is enough to exercise every path of the gate (allow, confirm, deny, taint, errors).
"""

from __future__ import annotations

import json
import random
import re
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import date, timedelta
from typing import Any

from airlock_sdk import Airlock, AirlockError, ApprovalRequired, Error, NotFound, Ok, Result, Run

# The demo data set's customers (runs/demo_tools.py) and the external addresses the agent writes to.
CUSTOMERS = {"cus_ada100": "ada@example.org", "cus_grace101": "grace@example.org", "cus_alan102": "alan@example.net"}
DOC_QUERIES = ["refund policy", "shipping times", "api keys", "sdk retries", "delete account"]
LOCAL_NOTES = {
    "cus_ada100": ["Prefers email over phone.", "Damaged delivery in March."],
    "cus_grace101": ["VIP since 2021."],
}
INJECTED_TICKET = "tkt_0002"


@dataclass
class Stats:
    lock: threading.Lock = field(default_factory=threading.Lock)
    outcomes: Counter = field(default_factory=Counter)
    runs: int = 0
    latencies: list[float] = field(default_factory=list)

    def add(self, results: list[Result], seconds: float) -> None:
        with self.lock:
            self.latencies.append(seconds)
            for result in results:
                key = result.error_class if isinstance(result, Error) else result.status
                self.outcomes[key] += 1


@dataclass
class Context:
    """What a scenario gets: its agent's client, a random source, and where to report."""

    airlock: Airlock
    agent: str
    rng: random.Random
    stats: Stats
    log: Callable[[str], None]
    on_approval: Callable[..., None]  # (run, approval, what, then=None): then(result) runs after the decision
    skills: dict[str, str] = field(default_factory=dict)
    can_finish: list[bool] = field(default_factory=lambda: [True])  # shared by the simulator's contexts

    def skill(self, short: str, default: str) -> str:
        """The agent's skill whose name ends with `short` (the demo catalog's namespaces may differ)."""
        return self.skills.get(short) or default

    def finish(self, run: Run, status: str = "completed", reason: str = "") -> None:
        """Close the run when the server offers it (a proposed endpoint; see Run.finish)."""
        if not self.can_finish[0]:
            return
        try:
            run.finish(status, reason)
        except NotFound:
            self.can_finish[0] = False  # not offered by this server: runs stay open
        except AirlockError as exc:
            self.log(f"[{self.agent}] could not finish run {run.run_id[:8]}: {exc}")

    def call(self, run: Run, calls: list[dict]) -> list[Result]:
        started = time.perf_counter()
        results = run.call(calls)
        self.stats.add(results, time.perf_counter() - started)
        return results


def describe(result: Result) -> str:
    if isinstance(result, Ok):
        return "ok" + (" (ran locally)" if result.executed_locally else "")
    if isinstance(result, ApprovalRequired):
        return f"needs approval #{result.approval_id}"
    return f"{result.error_class}" + (f" ({result.code})" if result.code else "")


def _summary(ctx: Context, run: Run, steps: list[tuple[str, Result]]) -> None:
    line = ", ".join(f"{name.rsplit('.', 1)[-1]} {describe(result)}" for name, result in steps)
    ctx.log(f"[{ctx.agent}] run {run.run_id[:8]}{' (tainted)' if run.tainted else ''}: {line}")


def support(ctx: Context) -> None:
    """Look up a customer's orders, refund one (needs approval), then email the customer (external: confirm)."""
    customer = ctx.rng.choice(list(CUSTOMERS))
    run = ctx.airlock.start_run(
        end_user=f"customer:{customer}",
        task="Refund the damaged order and tell the customer",
        end_user_roles=["customer"],
    )
    profile_name = ctx.skill("read_profile", "customer.read_profile")
    orders_name = ctx.skill("list_orders", "customer.list_orders")
    profile, orders = ctx.call(
        run,
        [
            {"name": profile_name, "arguments": {"customer_id": customer}},
            {"name": orders_name, "arguments": {"customer_id": customer}},
        ],
    )
    steps: list[tuple[str, Result]] = [(profile_name, profile), (orders_name, orders)]
    found = (orders.content or {}).get("orders") if isinstance(orders, Ok) else None
    if not found:
        _summary(ctx, run, steps)
        return
    order = ctx.rng.choice(found)
    name = profile.content.get("name", "there") if isinstance(profile, Ok) else "there"

    def email(refund_outcome: Result | None = None) -> None:
        if refund_outcome is not None and not isinstance(refund_outcome, Ok):
            ctx.finish(run, "failed", f"refund {describe(refund_outcome)}")
            return
        email_name = ctx.skill("send_email", "support.send_email")
        [sent] = ctx.call(
            run,
            [
                {
                    "name": email_name,
                    "arguments": {
                        "to": CUSTOMERS[customer],
                        "subject": f"Your refund for {order['order_id']}",
                        "body_text": f"Dear {name}, we are sorry the order arrived damaged; "
                        "your refund has been requested.",
                    },
                }
            ],
        )
        if isinstance(sent, ApprovalRequired):
            ctx.on_approval(run, sent, f"email to {CUSTOMERS[customer]}", then=lambda _result: ctx.finish(run))
        else:
            ctx.finish(run)
        ctx.log(f"[{ctx.agent}] run {run.run_id[:8]}: send_email {describe(sent)}")

    refund_name = ctx.skill("create_refund_request", "billing.create_refund_request")
    amount = min(order.get("total_cents", 1000), ctx.rng.choice([1500, 2500, 4500]))
    [refund] = ctx.call(
        run,
        [
            {
                "name": refund_name,
                "idempotency_key": f"refund:{run.run_id}:{order['order_id']}",
                "arguments": {
                    "order_id": order["order_id"],
                    "amount_cents": amount,
                    "currency": order.get("currency", "EUR"),
                    "reason_code": "damaged",
                },
            }
        ],
    )
    steps.append((refund_name, refund))
    _summary(ctx, run, steps)
    if isinstance(refund, ApprovalRequired):
        ctx.on_approval(
            run, refund, f"refund of {amount / 100:.2f} {order.get('currency', '')} on {order['order_id']}", then=email
        )  # the run continues once a person decides
    elif isinstance(refund, Ok):
        email()


def docs(ctx: Context) -> None:
    """A documentation agent: several searches in one batch (reads run in parallel) and local notes."""
    run = ctx.airlock.start_run(end_user="employee:dev-portal", task="Answer a developer's question from the docs")
    search = ctx.skill("search_documentation", "docs.search_documentation")
    queries = ctx.rng.sample(DOC_QUERIES, 3)
    results = ctx.call(run, [{"name": search, "arguments": {"query": q, "max_results": 3}} for q in queries])
    steps = [(search, r) for r in results]
    notes = ctx.skill("read_local_notes", "")
    if notes:
        steps += [
            (notes, r)
            for r in ctx.call(run, [{"name": notes, "arguments": {"customer_id": ctx.rng.choice(list(CUSTOMERS))}}])
        ]
    _summary(ctx, run, steps)
    ctx.finish(run)


def injection(ctx: Context) -> None:
    """Reads an inbound email that tells it to delete a user; the scripted model obeys, the gate does not."""
    run = ctx.airlock.start_run(
        end_user="customer:cus_ada100", task="Triage the support inbox", end_user_roles=["customer"]
    )
    inbox_name = ctx.skill("read_inbound_email", "support.read_inbound_email")
    [inbox] = ctx.call(
        run, [{"name": inbox_name, "arguments": {"ticket_id": INJECTED_TICKET}, "taint": "read inbound email"}]
    )
    steps: list[tuple[str, Result]] = [(inbox_name, inbox)]
    text = json.dumps(inbox.content) if isinstance(inbox, Ok) else ""
    target = re.search(r"usr_[A-Za-z0-9]+", text)
    admin = ctx.skill("delete_user_permanently", "admin.delete_user_permanently")
    [delete] = ctx.call(
        run,
        [
            {
                "name": admin,
                "arguments": {
                    "user_id": target.group(0) if target else "usr_grace101",
                    "erasure_request_id": "er_injected01",
                },
            }
        ],
    )
    steps.append((admin, delete))
    if isinstance(delete, ApprovalRequired):
        ctx.on_approval(run, delete, "injected admin call (decline it)")
    _summary(ctx, run, steps)
    if not isinstance(delete, ApprovalRequired):
        ctx.finish(run, "failed", "the only action asked for was refused")


def failures(ctx: Context) -> None:
    """A flaky tool retried, a rate limit honoured, and a timeout with an unknown outcome reconciled."""
    run = ctx.airlock.start_run(end_user="employee:warehouse", task="Ship a replacement for a damaged order")
    steps: list[tuple[str, Result]] = []
    stock = ctx.skill("check_stock", "inventory.check_stock")
    for attempt in range(3):  # transient errors are safe to retry for a read
        [result] = ctx.call(run, [{"name": stock, "arguments": {"sku": f"SKU-{ctx.rng.randint(100, 120)}"}}])
        steps.append((stock, result))
        if not (isinstance(result, Error) and result.retryable):
            break
        time.sleep(0.2 * 2**attempt)
    quotes = ctx.skill("quote_rates", "shipping.quote_rates")
    batch = ctx.call(run, [{"name": quotes, "arguments": {"destination": d}} for d in ("NL", "DE")])
    steps += [(quotes, r) for r in batch]
    limited = [r for r in batch if isinstance(r, Error) and r.error_class == "rate_limited"]
    if limited:
        time.sleep(min(float(limited[0].retry_after or 1), 5))
        steps += [(quotes, r) for r in ctx.call(run, [{"name": quotes, "arguments": {"destination": "DE"}}])]
    book = ctx.skill("book_courier", "shipping.book_courier")
    key = f"courier:{run.run_id}"
    pickup = (date.today() + timedelta(days=1)).isoformat()
    arguments = {"order_id": "ord_5002", "pickup_date": pickup}
    [booking] = ctx.call(run, [{"name": book, "arguments": arguments, "idempotency_key": key}])
    steps.append((book, booking))
    if isinstance(booking, Error) and booking.error_class == "timeout_unknown":
        # Never book again under a new key: ask with the same key (the gate replays what it recorded),
        # then read the run's record; an outcome still unknown is left to reconciliation.
        time.sleep(2.5)
        [again] = ctx.call(run, [{"name": book, "arguments": arguments, "idempotency_key": key}])
        steps.append((book, again))
        recorded = {c["call_id"]: c["status"] for c in run.status().get("calls", [])}
        ctx.log(
            f"[{ctx.agent}] run {run.run_id[:8]}: booking outcome as recorded: "
            f"{recorded.get(booking.call_id, 'unknown')}"
        )
    _summary(ctx, run, steps)
    ctx.finish(run)


SCENARIOS: dict[str, tuple[str, Callable[[Context], None]]] = {
    "support": ("support", support),
    "docs": ("docs", docs),
    "injection": ("support", injection),
    "failures": ("ops", failures),
}


def register_client_skills(airlock: Airlock) -> None:
    @airlock.client_skill("workspace.read_local_notes")
    def read_local_notes(customer_id: str) -> dict[str, Any]:
        return {"customer_id": customer_id, "notes": LOCAL_NOTES.get(customer_id, [])}
