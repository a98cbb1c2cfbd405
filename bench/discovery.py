"""Discovery evaluation: does `GET /api/v1/skills/search` put the right skill first, and never a forbidden one?

Two catalogs, each with labelled intents written as agents phrase them (paraphrases, synonyms, typos,
multi-step tasks, and intents for which nothing the agent may call is the right answer):

- demo: the skills `seed_demo` publishes (registry.demo.CATALOG) plus two traps, a skill offered only to
  another tenant and a retired one, searched by three agents (acme support and developer, globex billing)
  holding the demo grants;
- generated: 1,000 skills across 40 namespaces with overlapping descriptions (seeded, deterministic), some
  offered to other tenants or roles, some in namespaces the agent is not granted, some retired.

Figures per catalog: recall@1 and recall@5 (capped: |relevant in top k| / min(k, |relevant|)), MRR, the
zero-result precision (of the searches that answered nothing, the share labelled "nothing") and recall (of
the intents labelled "nothing", the share answered with nothing), p95 latency through the API, and leaks:
every result is checked against an oracle the harness computes from its own catalog definition (tenant and
role lists, grants, retired and deprecated versions), never from the code under test; a leak is any result
the oracle forbids and must be 0. The generated catalog is then grown to 10,000 skill versions for the
latency target (p95 <= 20 ms on PostgreSQL).

    .venv/bin/python -m bench.discovery          # SQLite, and PostgreSQL when DATABASE_URL names one
    .venv/bin/python manage.py evaluate_discovery  # the same figures; stores the latest per namespace

Each database is evaluated in a throwaway test database, so development data is never touched.
"""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field

from bench.common import Figure, percentile, print_table
from lib.ranking_scores import first_rank, recall_at, reciprocal_rank

SEED = 20261203
SCALE_VERSIONS = int(os.environ.get("BENCH_DISCOVERY_SCALE_VERSIONS", "10000"))

# --- the demo catalog's labelled intents --------------------------------------------------------
# (agent, query, expected skill names: empty when nothing the agent may call is right, kind)
DOCS = "docs.search_documentation"
PROFILE = "customer.read_profile"
ORDERS = "customer.list_orders"
ORDER = "orders.get_order"
REFUND = "billing.create_refund_request"
SEND = "support.send_email"
INBOUND = "support.read_inbound_email"
DRAFT = "drafts.create_email_draft"
STATUS = "support.update_ticket_status"
LEDGER = "billing.export_ledger"  # a trap: offered to globex only
MERGE = "support.merge_tickets"  # a trap: retired

DEMO_INTENTS: list[tuple[str, str, tuple[str, ...], str]] = [
    ("support", "search the documentation", (DOCS,), "paraphrase"),
    ("support", "how do I configure webhooks according to the docs", (DOCS,), "paraphrase"),
    ("support", "look up the API guide for rate limits", (DOCS,), "synonym"),
    ("support", "find help articles about the SDK", (DOCS,), "synonym"),
    ("support", "check the product manual", (DOCS,), "synonym"),
    ("support", "search docs", (DOCS,), "paraphrase"),
    ("support", "serch documentaton", (DOCS,), "typo"),
    ("support", "knowledge base lookup", (DOCS,), "synonym"),
    ("support", "read the customer's profile", (PROFILE,), "paraphrase"),
    ("support", "get customer details", (PROFILE,), "synonym"),
    ("support", "who is this customer, what plan are they on", (PROFILE,), "paraphrase"),
    ("support", "look up the account for cus_123", (PROFILE,), "synonym"),
    ("support", "fetch client info", (PROFILE,), "synonym"),
    ("support", "customer profle", (PROFILE,), "typo"),
    ("support", "show the account status of a customer", (PROFILE,), "paraphrase"),
    ("support", "which plan is the user subscribed to", (PROFILE,), "synonym"),
    ("support", "list the customer's orders", (ORDERS,), "paraphrase"),
    ("support", "show all purchases of this customer", (ORDERS,), "synonym"),
    ("support", "order history for a customer", (ORDERS,), "paraphrase"),
    ("support", "what did the client buy recently", (ORDERS,), "synonym"),
    ("support", "customer's recent orders newest first", (ORDERS,), "paraphrase"),
    ("support", "list ordres for customer", (ORDERS,), "typo"),
    ("support", "find an order when the customer doesn't know the id", (ORDERS,), "paraphrase"),
    ("support", "get order ord_42", (ORDER,), "paraphrase"),
    ("support", "look up an order by its id", (ORDER,), "paraphrase"),
    ("support", "order details and payment state", (ORDER,), "paraphrase"),
    ("support", "check whether an order was paid", (ORDER,), "synonym"),
    ("support", "fetch the purchase with this order number", (ORDER,), "synonym"),
    ("support", "get ordr by id", (ORDER,), "typo"),
    ("support", "what's in order ord_77, its line items", (ORDER,), "paraphrase"),
    ("support", "refund the customer", (REFUND,), "paraphrase"),
    ("support", "create a refund request", (REFUND,), "paraphrase"),
    ("support", "give the customer their money back", (REFUND,), "synonym"),
    ("support", "reimburse a paid order", (REFUND,), "synonym"),
    ("support", "issue a refund for a double charge", (REFUND,), "paraphrase"),
    ("support", "customer wants a chargeback, return the money", (REFUND,), "synonym"),
    ("support", "refnud order", (REFUND,), "typo"),
    ("support", "credit back the payment", (REFUND,), "synonym"),
    ("support", "send an email to the customer", (SEND,), "paraphrase"),
    ("support", "email the customer the final answer", (SEND,), "paraphrase"),
    ("support", "reply to the customer by mail", (SEND,), "synonym"),
    ("support", "message the client", (SEND,), "synonym"),
    ("support", "send emial", (SEND,), "typo"),
    ("support", "notify the customer", (SEND,), "synonym"),
    ("support", "read the customer's email", (INBOUND,), "paraphrase"),
    ("support", "what did the customer write in their message", (INBOUND,), "paraphrase"),
    ("support", "check the inbox for the ticket", (INBOUND,), "synonym"),
    ("support", "show incoming mail on this case", (INBOUND,), "synonym"),
    ("support", "read inbond emails", (INBOUND,), "typo"),
    ("support", "draft a reply for a human to review", (DRAFT,), "paraphrase"),
    ("support", "prepare an email but don't send it", (DRAFT,), "paraphrase"),
    ("support", "write a draft response", (DRAFT,), "synonym"),
    ("support", "propose a reply to the customer", (DRAFT,), "paraphrase"),
    ("support", "compose an unsent message", (DRAFT,), "synonym"),
    ("support", "create emal draft", (DRAFT,), "typo"),
    ("support", "close the ticket", (STATUS,), "paraphrase"),
    ("support", "mark the ticket as resolved", (STATUS,), "synonym"),
    ("support", "change ticket status to pending", (STATUS,), "paraphrase"),
    ("support", "update the case state", (STATUS,), "synonym"),
    ("support", "reopen the support ticket", (STATUS,), "synonym"),
    ("support", "set tiket status", (STATUS,), "typo"),
    ("support", "find the customer's order and refund it", (ORDERS, REFUND), "multistep"),
    ("support", "read the customer's email and then reply by email", (INBOUND, SEND), "multistep"),
    ("support", "check the order and refund the payment", (ORDER, REFUND), "multistep"),
    ("support", "draft an answer from the docs", (DRAFT, DOCS), "multistep"),
    ("support", "look at the customer profile then list their orders", (PROFILE, ORDERS), "multistep"),
    ("support", "reply to the customer and close the ticket", (SEND, STATUS), "multistep"),
    ("support", "read inbound mail, draft a response", (INBOUND, DRAFT), "multistep"),
    ("support", "refund the order and email the customer a confirmation", (REFUND, SEND), "multistep"),
    ("support", "permanently delete the user account", (), "none"),
    ("support", "erase all personal data for a GDPR request", (), "none"),
    ("support", "export the ledger", (), "none"),
    ("support", "merge two tickets", (), "none"),
    ("support", "book a flight to Lisbon", (), "none"),
    ("support", "what's the weather tomorrow", (), "none"),
    ("support", "play some jazz music", (), "none"),
    ("support", "translate this paragraph into French", (), "none"),
    ("support", "deploy the app to production", (), "none"),
    ("support", "rotate the database password", (), "none"),
    ("support", "schedule a meeting with the team", (), "none"),
    ("support", "lookup order legacy", (ORDER,), "paraphrase"),
    ("developer", "search the docs for the CLI flags", (DOCS,), "paraphrase"),
    ("developer", "api reference", (DOCS,), "synonym"),
    ("developer", "find documentation about sdk errors", (DOCS,), "paraphrase"),
    ("developer", "docs serach", (DOCS,), "typo"),
    ("developer", "refund a customer", (), "none"),
    ("developer", "send an email", (), "none"),
    ("developer", "read a customer profile", (), "none"),
    ("developer", "close the ticket", (), "none"),
    ("developer", "delete a user", (), "none"),
    ("billing", "refund a paid order", (REFUND,), "paraphrase"),
    ("billing", "money back for the customer", (REFUND,), "synonym"),
    ("billing", "read customer profile", (PROFILE,), "paraphrase"),
    ("billing", "customer's orders", (ORDERS,), "paraphrase"),
    ("billing", "export the ledger to CSV", (LEDGER,), "paraphrase"),
    ("billing", "download the general ledger", (LEDGER,), "synonym"),
    ("billing", "accounting entries export", (LEDGER,), "synonym"),
    ("billing", "ledgr export", (LEDGER,), "typo"),
    ("billing", "send an email to the customer", (), "none"),
    ("billing", "search the documentation", (), "none"),
    ("billing", "cancel the shipment", (), "none"),
    ("billing", "merge duplicate tickets", (), "none"),
]

DEMO_GRANTS = {
    ("acme", "support"): ["customer.*", "orders.*", "billing.*", "support.*", "docs.*", "drafts.*", "admin.*"],
    ("acme", "developer"): ["docs.*"],
    ("globex", "billing"): ["billing.*", "customer.*"],
}
DEMO_AGENTS = {"support": ("acme", "support"), "developer": ("acme", "developer"), "billing": ("globex", "billing")}


def _demo_traps() -> list[tuple[dict, str]]:
    """Two skills nobody in acme may find: one offered to globex only, one retired."""
    from registry.demo import CATALOG

    base = next(m for m in CATALOG if m["name"] == REFUND)
    ledger = {
        **base,
        "skill_id": "skl_billing_export_ledger",
        "name": LEDGER,
        "description": "Export the general ledger (accounting entries) as CSV for a period. Use for month-end "
        "reconciliation. No side effects. Returns a download link; empty when the period has no entries.",
        "risk": {**base["risk"], "effect": "read"},
        "permissions": {**base["permissions"], "allowed_tenants": ["globex"], "allowed_agent_roles": ["billing"]},
    }
    merge = {
        **base,
        "skill_id": "skl_support_merge_tickets",
        "name": MERGE,
        "description": "Merge duplicate support tickets into one. Use when a customer opened two tickets for "
        "one issue. Side effect: closes the duplicate. Returns the surviving ticket id.",
        "risk": {**base["risk"], "effect": "write"},
        "permissions": {**base["permissions"], "allowed_agent_roles": ["support", "billing"]},
    }
    return [(ledger, "active"), (merge, "retired")]


# --- the generated catalog ----------------------------------------------------------------------
# namespace -> its objects (snake case). Namespaces overlap on purpose: accounts, contacts, tickets,
# reports and documents appear in several, as they do in real catalogs.
NAMESPACES: dict[str, list[str]] = {
    "billing": ["invoice", "credit_note", "subscription", "tax_rate", "payment_method"],
    "payments": ["payment", "payout", "chargeback", "dispute", "refund"],
    "crm": ["contact", "lead", "opportunity", "account", "deal"],
    "sales": ["quote", "pipeline", "forecast", "account", "territory"],
    "marketing": ["campaign", "audience", "newsletter", "landing_page", "coupon"],
    "support": ["ticket", "macro", "satisfaction_survey", "escalation", "contact"],
    "helpdesk": ["ticket", "queue", "sla_policy", "agent_shift", "knowledge_article"],
    "hr": ["employee", "leave_request", "job_opening", "performance_review", "onboarding_checklist"],
    "payroll": ["payslip", "salary", "bonus", "tax_withholding", "pay_run"],
    "recruiting": ["candidate", "interview", "offer_letter", "job_opening", "referral"],
    "finance": ["budget", "expense_report", "journal_entry", "report", "cost_center"],
    "procurement": ["purchase_order", "vendor", "requisition", "contract", "catalog_item"],
    "inventory": ["stock_level", "warehouse", "sku", "stock_transfer", "reorder_rule"],
    "shipping": ["shipment", "tracking_number", "carrier", "shipping_label", "delivery_window"],
    "orders": ["order", "cart", "return_request", "order_note", "backorder"],
    "catalog": ["product", "price_list", "product_image", "category", "bundle"],
    "analytics": ["dashboard", "report", "metric", "funnel", "cohort"],
    "security": ["incident", "vulnerability", "access_review", "audit_log", "api_key"],
    "identity": ["user", "group", "role_assignment", "password_reset", "session"],
    "devops": ["deployment", "pipeline_run", "feature_flag", "environment", "rollback"],
    "monitoring": ["alert", "uptime_check", "log_query", "on_call_schedule", "status_page"],
    "github": ["pull_request", "issue", "repository", "release", "code_review"],
    "jira": ["issue", "sprint", "epic", "board", "worklog"],
    "slack": ["channel", "message", "reminder", "user_group", "emoji"],
    "email": ["message", "mailbox", "email_template", "mailing_list", "attachment"],
    "calendar": ["event", "meeting_room", "availability", "invitation", "recurring_event"],
    "files": ["document", "folder", "file_share", "file_version", "upload"],
    "docs": ["page", "space", "comment", "template", "page_history"],
    "legal": ["nda", "contract", "clause", "signature_request", "legal_hold"],
    "compliance": ["policy_attestation", "control", "evidence", "risk_register", "audit"],
    "facilities": ["desk_booking", "visitor_pass", "maintenance_request", "parking_spot", "floor_plan"],
    "it": ["laptop", "software_license", "asset", "access_request", "device"],
    "travel": ["trip", "hotel_booking", "flight_booking", "travel_policy", "per_diem"],
    "learning": ["course", "enrollment", "certification", "quiz", "learning_path"],
    "warehouse": ["pick_list", "bin_location", "cycle_count", "pallet", "dock_appointment"],
    "fleet": ["vehicle", "fuel_card", "driver", "service_schedule", "route"],
    "energy": ["meter_reading", "tariff", "outage", "consumption_report", "solar_panel"],
    "insurance": ["policy", "claim", "premium", "underwriting_case", "beneficiary"],
    "banking": ["bank_account", "wire_transfer", "statement", "standing_order", "card"],
    "healthcare": ["patient_record", "appointment", "prescription", "lab_result", "referral_letter"],
}
# Namespaces whose objects appear nowhere else; the evaluated agent is not granted them.
UNGRANTED = ["payroll", "legal", "travel", "energy", "healthcare", "fleet", "insurance", "banking"]

VERBS: dict[str, tuple[str, str]] = {
    # verb -> (effect, description template); {o} object, {os} plural, {ns} namespace label
    "get": (
        "read",
        "Get one {o} by id from {ns}. Use when you already have the {o} id. No side effects. "
        "Returns the {o}; found is false when it does not exist.",
    ),
    "list": (
        "read",
        "List {os} in {ns}, newest first, filtered by status or owner. Use to browse or find a "
        "{o} without its id. No side effects. Returns a page of {os} and a next_cursor; empty when none.",
    ),
    "search": (
        "read",
        "Search {os} in {ns} by keywords in their text and fields. Use when the user describes "
        "a {o} in words. Read-only. Returns ranked {os}; an empty list means no match.",
    ),
    "create": (
        "write",
        "Create a new {o} in {ns} from the given fields. Use when the user asks for a new {o}. "
        "Side effect: creates a record. Returns the new {o} id.",
    ),
    "update": (
        "write",
        "Update fields of an existing {o} in {ns}. Use to change or correct a {o}. Side effect: "
        "changes the record. Returns the updated {o}; found is false when missing.",
    ),
    "delete": (
        "destructive",
        "Delete a {o} from {ns} permanently. Use only when the user explicitly asks. "
        "Side effect: irreversible, cannot be undone. Returns a receipt.",
    ),
    "cancel": (
        "write",
        "Cancel a pending {o} in {ns}. Use when it should no longer go ahead. Side effect: "
        "changes its status to cancelled. Returns the new status.",
    ),
    "export": (
        "read",
        "Export {os} from {ns} as a CSV file for a date range. Use for reporting or a "
        "spreadsheet. No side effects. Returns a download link; empty when nothing matched.",
    ),
    "send": (
        "external",
        "Send a {o} from {ns} to a recipient by email. Use only when it is final. Side effect: "
        "sends a message that cannot be unsent. Returns the message id.",
    ),
    "approve": (
        "write",
        "Approve a pending {o} in {ns}. Use after the checks passed. Side effect: records the "
        "approval and notifies the requester. Returns the approval.",
    ),
    "archive": (
        "write",
        "Archive an old {o} in {ns} so it no longer shows in lists. Use for cleanup. Side "
        "effect: hides the record (restorable). Returns the archived {o}.",
    ),
    "assign": (
        "write",
        "Assign a {o} in {ns} to a team member or owner. Use to hand work over. Side effect: "
        "changes the assignee and notifies them. Returns the {o}.",
    ),
    "summarize": (
        "read",
        "Summarize a {o} from {ns} in a few sentences. Use before answering questions about "
        "it. No side effects. Returns a short summary text.",
    ),
    "draft": (
        "draft",
        "Draft a {o} in {ns} for a human to review; nothing is sent or saved for real. Use to "
        "propose one. Side effect: creates a draft only. Returns the draft id.",
    ),
    "sync": (
        "write",
        "Sync {os} in {ns} with the external system of record. Use when data looks stale. Side "
        "effect: updates local records. Returns counts of changed {os}.",
    ),
}
# How agents say a verb; the first is what the generator writes into `examples`.
VERB_PHRASES: dict[str, list[str]] = {
    "get": ["get the {o}", "fetch {o}", "look up a {o}", "show me the {o}", "retrieve {o} details", "open {o}"],
    "list": ["list {os}", "show all {os}", "what {os} do we have", "browse {os}", "all my {os}"],
    "search": ["search {os}", "find {os} about", "search for a {o} matching", "query {os} by keyword"],
    "create": ["create a {o}", "make a new {o}", "add a {o}", "open a new {o}", "set up a {o}"],
    "update": ["update the {o}", "change the {o}", "edit {o} fields", "modify a {o}", "correct the {o}"],
    "delete": ["delete the {o}", "remove a {o}", "get rid of the {o}", "erase {o} permanently"],
    "cancel": ["cancel the {o}", "call off the {o}", "stop the pending {o}", "abort {o}"],
    "export": ["export {os}", "download {os} as csv", "export {os} to a spreadsheet", "dump {os} to csv"],
    "send": ["send the {o}", "email the {o}", "send {o} to the recipient", "mail a {o}"],
    "approve": ["approve the {o}", "sign off on the {o}", "accept the pending {o}", "okay the {o}"],
    "archive": ["archive the {o}", "archive old {os}", "hide the {o} from lists", "put the {o} in the archive"],
    "assign": ["assign the {o}", "hand the {o} over to", "reassign {o} to a teammate", "give the {o} to"],
    "summarize": ["summarize the {o}", "give me a summary of the {o}", "tl;dr of the {o}", "recap the {o}"],
    "draft": ["draft a {o}", "prepare a {o} for review", "write a draft {o}", "propose a {o}"],
    "sync": ["sync {os}", "refresh {os} from the source system", "resync stale {os}", "synchronize {os}"],
}
# Owner-written synonyms for some objects (what a `synonyms` list in a manifest holds).
OBJECT_SYNONYMS: dict[str, list[str]] = {
    "invoice": ["bill"],
    "contact": ["person"],
    "ticket": ["case"],
    "employee": ["staff member", "worker"],
    "candidate": ["applicant"],
    "shipment": ["package", "parcel"],
    "purchase_order": ["po"],
    "vendor": ["supplier"],
    "pull_request": ["pr"],
    "sku": ["product code"],
    "incident": ["security event"],
    "deployment": ["release to production"],
    "laptop": ["notebook computer"],
    "meeting_room": ["conference room"],
    "expense_report": ["expense claim"],
    "campaign": ["promotion"],
    "user": ["login"],
    "stock_level": ["inventory count"],
}
OUT_OF_DOMAIN = [
    "what's the weather like in Oslo",
    "play a song by the Beatles",
    "translate hello into Japanese",
    "tell me a joke",
    "what is the capital of Peru",
    "convert 30 celsius to fahrenheit",
    "order a taxi to the airport",
    "recommend a good novel",
    "how tall is mount everest",
    "write a haiku about autumn",
    "solve this sudoku",
    "water the plants",
]


@dataclass
class Intent:
    agent: str
    query: str
    expected: tuple[str, ...]
    kind: str


@dataclass
class Catalog:
    """Manifests with their status, the agents (key -> (tenant, role)) and their grants."""

    manifests: list[tuple[dict, str]]
    agents: dict[str, tuple[str, str]]
    grants: dict[tuple[str, str], list[str]]
    intents: list[Intent] = field(default_factory=list)


def _plural(obj: str) -> str:
    words = obj.replace("_", " ")
    if words.endswith(("s", "x", "ch", "sh")):
        return words + "es"
    if words.endswith("y") and words[-2] not in "aeiou":
        return words[:-1] + "ies"
    return words + "s"


def _words(obj: str) -> str:
    return obj.replace("_", " ")


def generated_manifest(namespace: str, verb: str, obj: str, rng: random.Random, *, version: str = "1.0.0") -> dict:
    effect, template = VERBS[verb]
    name = f"{namespace}.{verb}_{obj}"
    description = template.format(o=_words(obj), os=_plural(obj), ns=namespace)
    roll = rng.random()
    tenants = ["*"] if roll < 0.8 else (["acme"] if roll < 0.9 else ["globex"])
    roles = rng.choice([["*"], ["ops"], ["ops", "support"], ["support"], ["ops", "finance"], ["*"]])
    manifest = {
        "skill_id": "skl_" + name.replace(".", "_"),
        "name": name,
        "version": version,
        "description": description,
        "input_schema": {
            "type": "object",
            "properties": {f"{obj}_id": {"type": "string", "maxLength": 64, "description": f"The {_words(obj)} id."}},
            "additionalProperties": False,
        },
        "output_schema": {"type": "object", "properties": {obj: {"type": "object", "description": "The record."}}},
        "risk": {
            "effect": effect,
            "data_classification": rng.choice(["public", "internal", "internal", "confidential", "restricted"]),
            "approval": "not_required",
        },
        "permissions": {"allowed_agent_roles": roles, "allowed_tenants": tenants, "oauth_scopes": []},
        "execution": {
            "adapter": f"python:demo.{verb}",
            "timeout_ms": 5000,
            "max_attempts": 1,
            "result_limit_bytes": 8192,
        },
        "ownership": {"team": "eval-team"},
    }
    if rng.random() < 0.35:  # some owners wrote synonyms and examples, most did not
        if obj in OBJECT_SYNONYMS:
            manifest["synonyms"] = list(OBJECT_SYNONYMS[obj])
        manifest["examples"] = [VERB_PHRASES[verb][0].format(o=_words(obj), os=_plural(obj))]
    return manifest


def _typo(query: str, rng: random.Random) -> str:
    words = query.split()
    candidates = [i for i, word in enumerate(words) if len(word) >= 5 and word.isalpha()]
    if not candidates:
        return query
    i = rng.choice(candidates)
    word = words[i]
    at = rng.randrange(1, len(word) - 1)
    operation = rng.choice(["drop", "swap", "double"])
    if operation == "drop":
        word = word[:at] + word[at + 1 :]
    elif operation == "swap":
        word = word[: at - 1] + word[at] + word[at - 1] + word[at + 1 :]
    else:
        word = word[:at] + word[at] + word[at:]
    words[i] = word
    return " ".join(words)


def _phrase(verb: str, obj: str, rng: random.Random, *, synonyms: bool) -> str:
    noun = obj
    if synonyms and obj in OBJECT_SYNONYMS and rng.random() < 0.5:
        noun = rng.choice(OBJECT_SYNONYMS[obj]).replace(" ", "_")
    # the first phrase is the one owners put in `examples`: queries use the others
    return rng.choice(VERB_PHRASES[verb][1:]).format(o=_words(noun), os=_plural(noun))


def generated_catalog(skills: int = 1000, *, seed: int = SEED, intents: int = 170) -> Catalog:
    """`skills` skills over the 40 namespaces (5 objects x up to 5 verbs each, then numbered variants)."""
    rng = random.Random(seed)
    combos: list[tuple[str, str, str]] = []
    for namespace, objects in NAMESPACES.items():
        for obj in objects:
            for verb in rng.sample(sorted(VERBS), 5):
                combos.append((namespace, verb, obj))
    manifests: list[tuple[dict, str]] = []
    for namespace, verb, obj in combos[:skills]:
        status = "retired" if rng.random() < 0.03 else "active"
        manifests.append((generated_manifest(namespace, verb, obj, rng), status))
    variant = 2
    while len(manifests) < skills:  # the scale catalog: numbered variants of the same skills
        for namespace, verb, obj in combos:
            if len(manifests) >= skills:
                break
            manifests.append((generated_manifest(namespace, verb, f"{obj}_v{variant}", rng), "active"))
        variant += 1
    agents = {"ops": ("acme", "ops")}
    grants = {("acme", "ops"): [f"{namespace}.*" for namespace in NAMESPACES if namespace not in UNGRANTED]}
    catalog = Catalog(manifests=manifests, agents=agents, grants=grants)
    catalog.intents = _generated_intents(catalog, rng, intents)
    return catalog


def _generated_intents(catalog: Catalog, rng: random.Random, count: int) -> list[Intent]:
    visible = sorted(visible_names(catalog, "ops"))
    by_namespace: dict[str, list[str]] = {}
    for name in visible:
        by_namespace.setdefault(name.split(".")[0], []).append(name)
    intents: list[Intent] = []
    zero = max(20, count // 8)
    for name in rng.sample(visible, min(len(visible), count - zero)):
        namespace, tool = name.split(".", 1)
        verb, obj = tool.split("_", 1)
        query = _phrase(verb, obj, rng, synonyms=True)
        roll = rng.random()
        if roll < 0.15:
            query = f"{query} in {namespace}"
        kind = "paraphrase"
        if roll > 0.8:
            query, kind = _typo(query, rng), "typo"
        elif rng.random() < 0.12 and len(by_namespace[namespace]) > 1:
            other = rng.choice([n for n in by_namespace[namespace] if n != name])
            other_verb, other_obj = other.split(".", 1)[1].split("_", 1)
            query = f"{query} and then {_phrase(other_verb, other_obj, rng, synonyms=False)}"
            intents.append(Intent("ops", query, (name, other), "multistep"))
            continue
        intents.append(Intent("ops", query, (name,), kind))
    shown_words = {word for name in visible for word in name.split(".", 1)[1].split("_")[1:]}
    hidden = sorted(
        {
            (verb, obj)
            for name, _ in _names(catalog)
            if name.split(".")[0] in UNGRANTED
            for verb, obj in [name.split(".", 1)[1].split("_", 1)]
            if not set(obj.split("_")) & shown_words  # only what no visible skill is about
        }
    )
    for verb, obj in rng.sample(hidden, min(len(hidden), zero - len(OUT_OF_DOMAIN))):
        intents.append(Intent("ops", _phrase(verb, obj, rng, synonyms=False), (), "none"))
    intents += [Intent("ops", query, (), "none") for query in OUT_OF_DOMAIN]
    return intents


def _names(catalog: Catalog) -> list[tuple[str, str]]:
    return [(manifest["name"], status) for manifest, status in catalog.manifests]


def demo_catalog() -> Catalog:
    from registry.demo import CATALOG, DEPRECATED

    manifests = [(m, "deprecated" if m["name"] in DEPRECATED else "active") for m in CATALOG] + _demo_traps()
    intents = [Intent(*row) for row in DEMO_INTENTS]
    return Catalog(manifests=manifests, agents=DEMO_AGENTS, grants=DEMO_GRANTS, intents=intents)


# --- the permission oracle ----------------------------------------------------------------------


def _granted(patterns: list[str], name: str) -> bool:
    return any(p == "*" or p == name or (p.endswith(".*") and name.startswith(p[:-1])) for p in patterns)


def visible_names(catalog: Catalog, agent: str) -> set[str]:
    """What this agent may discover, from the catalog's own definition: active, offered to the agent's tenant
    and role, and granted. Written here on purpose, apart from registry.offering and policies.grants."""
    tenant, role = catalog.agents[agent]
    patterns = catalog.grants.get((tenant, role), [])
    names = set()
    for manifest, status in catalog.manifests:
        permissions = manifest["permissions"]
        if (
            status == "active"
            and ("*" in permissions["allowed_tenants"] or tenant in permissions["allowed_tenants"])
            and ("*" in permissions["allowed_agent_roles"] or role in permissions["allowed_agent_roles"])
            and _granted(patterns, manifest["name"])
        ):
            names.add(manifest["name"])
    return names


# --- metrics -------------------------------------------------------------------------------------


@dataclass
class Outcome:
    intent: Intent
    results: list[str]
    elapsed_ms: float
    leaks: list[str]

    def rank(self) -> int | None:
        return first_rank(self.results, self.intent.expected)

    def recall(self, k: int) -> float:
        return recall_at(self.results, self.intent.expected, k)


@dataclass
class Scores:
    intents: int
    answerable: int
    recall_at_1: float
    recall_at_5: float
    mrr: float
    zero_result_precision: float | None
    zero_result_recall: float | None
    p95_ms: float
    leaks: int

    def as_dict(self) -> dict:
        return asdict(self)


def score(outcomes: list[Outcome]) -> Scores:
    answerable = [o for o in outcomes if o.intent.expected]
    empty = [o for o in outcomes if not o.results]
    nothing = [o for o in outcomes if not o.intent.expected]

    def mean(values: list[float]) -> float:
        return sum(values) / len(values) if values else 0.0

    return Scores(
        intents=len(outcomes),
        answerable=len(answerable),
        recall_at_1=mean([o.recall(1) for o in answerable]),
        recall_at_5=mean([o.recall(5) for o in answerable]),
        mrr=mean([reciprocal_rank(o.results, o.intent.expected) for o in answerable]),
        zero_result_precision=mean([not o.intent.expected for o in empty]) if empty else None,
        zero_result_recall=mean([not o.results for o in nothing]) if nothing else None,
        p95_ms=percentile([o.elapsed_ms for o in outcomes], 95),
        leaks=sum(len(o.leaks) for o in outcomes),
    )


def by_namespace(outcomes: list[Outcome]) -> dict[str, Scores]:
    """Scores per namespace of the intents' first expected skill (intents expecting nothing are not counted)."""
    groups: dict[str, list[Outcome]] = {}
    for outcome in outcomes:
        if outcome.intent.expected:
            groups.setdefault(outcome.intent.expected[0].split(".")[0], []).append(outcome)
    return {namespace: score(group) for namespace, group in sorted(groups.items())}


# --- running it -----------------------------------------------------------------------------------


def load_catalog(catalog: Catalog) -> dict[str, str]:
    """Store the catalog (bulk, as an import would), grant it, publish a snapshot; returns agent keys."""
    from django.contrib.auth import get_user_model
    from django.utils import timezone

    from console.models import Team, Tenant
    from console.services import create_agent
    from policies.models import Grant
    from registry.models import Skill, SkillVersion, refresh_search_vectors
    from registry.snapshots import publish_snapshot

    admin = get_user_model().objects.create_superuser("discovery-eval", "eval@example.com", None)
    teams = {}
    for manifest, _ in catalog.manifests:
        slug = manifest["ownership"]["team"]
        if slug not in teams:
            teams[slug] = Team.objects.get_or_create(slug=slug, defaults={"name": slug})[0]
    skills = {}
    for manifest, _ in catalog.manifests:
        if manifest["name"] not in skills:
            skills[manifest["name"]] = Skill(
                skill_id=manifest["skill_id"],
                name=manifest["name"],
                namespace=manifest["name"].rsplit(".", 1)[0],
                owner_team=teams[manifest["ownership"]["team"]],
            )
    Skill.objects.bulk_create(skills.values(), batch_size=1000)
    now = timezone.now()
    versions = []
    for manifest, status in catalog.manifests:
        skill = skills[manifest["name"]]
        major, minor, patch = (int(part) for part in manifest["version"].split("."))
        versions.append(
            SkillVersion(
                skill=skill,
                version=manifest["version"],
                major=major,
                minor=minor,
                patch=patch,
                status=status,
                manifest=manifest,
                effect=manifest["risk"]["effect"],
                data_classification=manifest["risk"]["data_classification"],
                description=manifest["description"],
                published_at=now,
                retired_at=now if status == "retired" else None,
                deprecated_at=now if status == "deprecated" else None,
                search_text=" ".join(
                    [skill.name, skill.name.replace(".", " ").replace("_", " "), manifest["description"]]
                ),
            )
        )
    SkillVersion.objects.bulk_create(versions, batch_size=1000)
    refresh_search_vectors(SkillVersion.objects.all())
    tenants = {
        slug: Tenant.objects.get_or_create(slug=slug, defaults={"name": slug.title()})[0]
        for slug, _ in catalog.agents.values()
    }
    Grant.objects.bulk_create(
        Grant(tenant=tenants[slug], skill_pattern=pattern, agent_role=role, granted_by=admin)
        for (slug, role), patterns in catalog.grants.items()
        if slug in tenants
        for pattern in patterns
    )
    publish_snapshot(reason="discovery evaluation")
    return {
        agent: create_agent(tenant=tenants[slug], name=f"eval-{agent}", role=role)[1]
        for agent, (slug, role) in catalog.agents.items()
    }


def search_all(catalog: Catalog, keys: dict[str, str], limit: int = 10) -> list[Outcome]:
    from django.urls import reverse
    from rest_framework.test import APIClient

    url = reverse("registry_api:skill-search")
    clients = {}
    for agent, key in keys.items():
        clients[agent] = APIClient()
        clients[agent].credentials(HTTP_AUTHORIZATION=f"Bearer {key}")
    allowed = {agent: visible_names(catalog, agent) for agent in keys}
    for agent in keys:  # warm: the permitted set and its index are built once per snapshot and agent
        clients[agent].get(url, {"q": "warm up"})
    outcomes = []
    for intent in catalog.intents:
        started = time.perf_counter()
        response = clients[intent.agent].get(url, {"q": intent.query, "limit": limit})
        elapsed = (time.perf_counter() - started) * 1000
        assert response.status_code == 200, response.content
        names = [row["name"] for row in response.json()["results"]]
        outcomes.append(Outcome(intent, names, elapsed, [n for n in names if n not in allowed[intent.agent]]))
    return outcomes


@dataclass
class Report:
    vendor: str
    catalogs: dict[str, Scores]
    namespaces: dict[str, dict[str, Scores]]
    scale_versions: int = 0
    scale: Scores | None = None
    misses: list[dict] = field(default_factory=list)

    def figures(self) -> list[Figure]:
        figures = []
        for name, scores in self.catalogs.items():
            figures += _catalog_figures(f"{self.vendor}: {name}", scores)
        if self.scale:
            label = f"{self.vendor}: generated at {self.scale_versions:,} versions"
            figures += [
                Figure(f"{label}: recall@5", self.scale.recall_at_5, "ratio"),
                Figure(f"{label}: search p95", self.scale.p95_ms, "ms", 20.0, "target p95 <= 20 ms"),
                Figure(f"{label}: leaks", self.scale.leaks, "results"),
            ]
        return figures


def _catalog_figures(label: str, scores: Scores) -> list[Figure]:
    return [
        Figure(f"{label}: intents", scores.intents, "intents"),
        Figure(f"{label}: recall@1", scores.recall_at_1, "ratio", 0.7, "target recall@1 >= 0.7"),
        Figure(f"{label}: recall@5", scores.recall_at_5, "ratio", 0.9, "target recall@5 >= 0.9"),
        Figure(f"{label}: MRR", scores.mrr, "ratio"),
        Figure(f"{label}: zero-result precision", scores.zero_result_precision or 0.0, "ratio"),
        Figure(f"{label}: zero-result recall", scores.zero_result_recall or 0.0, "ratio"),
        Figure(f"{label}: search p95", scores.p95_ms, "ms"),
        Figure(f"{label}: leaks", scores.leaks, "results", 0.0, "target: 0 leaks"),
    ]


def evaluate(*, scale_versions: int = SCALE_VERSIONS, generated_skills: int = 1000) -> Report:
    """Run every catalog in the current (throwaway) database, flushing it between catalogs."""
    from django.core.management import call_command
    from django.db import connection

    from registry.snapshots import clear_snapshot_cache

    vendor = "PostgreSQL" if connection.vendor == "postgresql" else "SQLite"
    catalogs: dict[str, Scores] = {}
    namespaces: dict[str, dict[str, Scores]] = {}
    misses: list[dict] = []
    for name, catalog in (("demo", demo_catalog()), ("generated", generated_catalog(generated_skills))):
        call_command("flush", verbosity=0, interactive=False)
        clear_snapshot_cache()
        outcomes = search_all(catalog, load_catalog(catalog))
        catalogs[name] = score(outcomes)
        namespaces[name] = by_namespace(outcomes)
        misses += [
            {"catalog": name, "query": o.intent.query, "expected": list(o.intent.expected), "got": o.results[:3]}
            for o in outcomes
            if (o.intent.expected and o.recall(5) < 1) or (not o.intent.expected and o.results)
        ]
    report = Report(vendor=vendor, catalogs=catalogs, namespaces=namespaces, misses=misses)
    if scale_versions:
        catalog = generated_catalog(scale_versions // 2)
        catalog.manifests += [
            ({**manifest, "version": "1.1.0"}, status) for manifest, status in catalog.manifests
        ]  # two versions of each skill, as catalogs grow
        call_command("flush", verbosity=0, interactive=False)
        clear_snapshot_cache()
        report.scale_versions = len(catalog.manifests)
        report.scale = score(search_all(catalog, load_catalog(catalog)))
    call_command("flush", verbosity=0, interactive=False)  # leave nothing behind, misses included
    clear_snapshot_cache()
    return report


def evaluate_in_test_database(**options) -> Report:
    """`evaluate` in a throwaway database created for it and dropped afterwards."""
    from django.conf import settings
    from django.test.utils import setup_databases, setup_test_environment, teardown_databases, teardown_test_environment

    settings.ALLOWED_HOSTS = [*settings.ALLOWED_HOSTS, "testserver"]
    setup_test_environment()
    old_config = setup_databases(verbosity=0, interactive=False)
    try:
        return evaluate(**options)
    finally:
        teardown_databases(old_config, verbosity=0)
        teardown_test_environment()


def _child(database_url: str | None) -> Report:
    env = dict(os.environ)
    env.pop("DATABASE_URL", None)
    if database_url:
        env["DATABASE_URL"] = database_url
    env.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    done = subprocess.run(
        [sys.executable, "-m", "bench.discovery", "--one"], env=env, capture_output=True, text=True, timeout=900
    )
    if done.returncode != 0:
        raise RuntimeError(f"bench.discovery --one failed:\n{done.stderr[-3000:]}")
    return report_from_json(done.stdout.strip().splitlines()[-1])


def report_to_json(report: Report) -> str:
    return json.dumps(asdict(report))


def report_from_json(text: str) -> Report:
    raw = json.loads(text)
    return Report(
        vendor=raw["vendor"],
        catalogs={name: Scores(**scores) for name, scores in raw["catalogs"].items()},
        namespaces={
            name: {ns: Scores(**scores) for ns, scores in rows.items()} for name, rows in raw["namespaces"].items()
        },
        scale_versions=raw["scale_versions"],
        scale=Scores(**raw["scale"]) if raw["scale"] else None,
        misses=raw["misses"],
    )


def reports() -> list[Report]:
    """SQLite always; PostgreSQL too when DATABASE_URL names one."""
    found = [_child(None)]
    database_url = os.environ.get("DATABASE_URL", "")
    if database_url.startswith(("postgres://", "postgresql://")):
        found.append(_child(database_url))
    return found


def run() -> list[Figure]:
    return [figure for report in reports() for figure in report.figures()]


if __name__ == "__main__":
    if "--one" in sys.argv:
        from bench.common import setup_django

        setup_django()
        print(report_to_json(evaluate_in_test_database()))
    elif "--misses" in sys.argv:
        for report in reports():
            for miss in report.misses:
                print(report.vendor, json.dumps(miss))
    else:
        print_table(run(), "Discovery: labelled intents on the demo and generated catalogs")
