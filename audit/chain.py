"""Each tenant's audit rows chained by hash, signed checkpoints of each chain's head, and their check.

A row's *content* is its own fields in RFC 8785 JSON (lib.canonical), without those the application
itself changes later: foreign keys that become NULL when their target is deleted (the `_label` fields
keep the names) and retention's own marks (`redacted_at`, `detached_at`). A JSON field enters the
content as its SHA-256 only, and the link keeps that hash: retention may redact the JSON (approvals
.retention) and every other field of the row stays checkable. docs/security.md says what this proves.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import Any
from uuid import UUID

from django.apps import apps
from django.db import connection, models, transaction
from django.utils import timezone

from audit.models import AuditCheckpoint, AuditLink
from lib import signing
from lib.append_only import AppendOnlyModel
from lib.canonical import canonical_json, sha256_of

GENESIS = "0" * 64
NO_TENANT = 0
# Fields retention sets on a row it keeps (approvals.retention): outside the content.
RETENTION_MARKS = frozenset({"redacted_at", "detached_at"})
# pg_advisory_xact_lock(class, tenant): this class is "AUDT".
LOCK_CLASS = 0x41554454
READ_BATCH = 1000


def chained_logs() -> list[type[AppendOnlyModel]]:
    """Every audit log: the models whose rows are chained."""
    return sorted(
        (model for model in apps.get_models() if issubclass(model, AppendOnlyModel)), key=lambda m: m._meta.label
    )


def tenant_of(row: models.Model) -> int:
    return getattr(row, "tenant_id", None) or NO_TENANT


def _sealed_fields(model: type[models.Model]) -> list[models.Field]:
    sealed = []
    for model_field in model._meta.concrete_fields:
        if model_field.name in RETENTION_MARKS:
            continue
        if model_field.is_relation and model_field.remote_field.on_delete is models.SET_NULL:
            continue
        sealed.append(model_field)
    return sealed


def _plain(value: Any) -> Any:
    """A field's value as JSON, the same whether read back from the database or still in memory."""
    if isinstance(value, datetime):
        if timezone.is_naive(value):
            value = timezone.make_aware(value, UTC)
        return value.astimezone(UTC).isoformat(timespec="microseconds")
    if isinstance(value, date):
        return value.isoformat()
    if isinstance(value, (UUID, Decimal)):
        return str(value)
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def _json_of(model_field: models.JSONField, value: Any) -> Any:
    """The JSON as stored: encoded with the field's own encoder, as the database holds it."""
    return json.loads(json.dumps(value, cls=model_field.encoder))


def sealed_content(row: models.Model, *, json_sha256: dict[str, str] | None = None) -> tuple[dict, dict[str, str]]:
    """The row's content as hashed ({field: value}, JSON fields as their SHA-256) and the JSON fields' hashes.
    `json_sha256` stands in for the JSON fields of a redacted row (the hashes its link kept)."""
    content: dict[str, Any] = {}
    hashes: dict[str, str] = {}
    for model_field in _sealed_fields(type(row)):
        value = getattr(row, model_field.attname)
        if isinstance(model_field, models.JSONField):
            hashes[model_field.name] = sha256_of(_json_of(model_field, value))
            if json_sha256 is not None and model_field.name in json_sha256:
                hashes[model_field.name] = json_sha256[model_field.name]
            content[model_field.name] = hashes[model_field.name]
        else:
            content[model_field.name] = _plain(model_field.to_python(value) if value is not None else None)
    return content, hashes


def link_sha256(*, tenant: int, seq: int, log: str, row: int, content_sha256: str, prev_sha256: str) -> str:
    body = {"tenant": tenant, "seq": seq, "log": log, "row": row, "content": content_sha256, "prev": prev_sha256}
    return sha256_of(body)


def _lock_chain(tenant: int) -> None:
    """Serialise inserts into one tenant's chain until the transaction ends. SQLite writers are already
    serialised (IMMEDIATE transactions); on PostgreSQL a transaction-scoped advisory lock per tenant."""
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [LOCK_CLASS, tenant % 2**31])


def append_link(row: AppendOnlyModel) -> AuditLink:
    """Link a row just inserted into its tenant's chain (the receiver of lib.append_only.chain_row)."""
    tenant = tenant_of(row)
    content, hashes = sealed_content(row)
    label = row._meta.label
    with transaction.atomic():
        _lock_chain(tenant)
        head = AuditLink.objects.filter(tenant_ref=tenant).order_by("-seq").values_list("seq", "sha256").first()
        seq, prev = (head[0] + 1, head[1]) if head else (1, GENESIS)
        content_sha256 = sha256_of(content)
        return AuditLink.objects.create(
            tenant_ref=tenant,
            seq=seq,
            log=label,
            row_ref=row.pk,
            fields=sorted(content),
            content_sha256=content_sha256,
            json_sha256=hashes,
            prev_sha256=prev,
            sha256=link_sha256(
                tenant=tenant, seq=seq, log=label, row=row.pk, content_sha256=content_sha256, prev_sha256=prev
            ),
        )


def tombstone_deleted_row(sender: type[models.Model], instance: models.Model, **kwargs: Any) -> None:
    """A row the application deleted (retention's purge, a cascade) leaves its link as a tombstone."""
    if isinstance(instance, AppendOnlyModel):
        AuditLink.objects.filter(log=instance._meta.label, row_ref=instance.pk, removed_at__isnull=True).update(
            removed_at=timezone.now()
        )


# Checkpoints ----------------------------------------------------------------------------------------


def checkpoint_payload(*, tenant: int, seq: int, sha256: str, at: datetime, key_id: str) -> bytes:
    return canonical_json({"tenant": tenant, "seq": seq, "sha256": sha256, "at": _plain(at), "key_id": key_id})


def write_checkpoints(*, now: datetime | None = None) -> int:
    """Sign the head of every chain that grew since its last checkpoint. Returns how many were signed;
    run twice, the second run signs nothing."""
    now = now or timezone.now()
    signed = 0
    key_id = signing.key_id()
    heads = AuditLink.objects.values("tenant_ref").annotate(head=models.Max("seq"))
    for head in heads:
        tenant = head["tenant_ref"]
        last = AuditCheckpoint.objects.filter(tenant_ref=tenant).order_by("-seq").values_list("seq", flat=True).first()
        if last is not None and last >= head["head"]:
            continue
        link = AuditLink.objects.get(tenant_ref=tenant, seq=head["head"])
        payload = checkpoint_payload(tenant=tenant, seq=link.seq, sha256=link.sha256, at=now, key_id=key_id)
        AuditCheckpoint.objects.create(
            tenant_ref=tenant, seq=link.seq, sha256=link.sha256, at=now, key_id=key_id, signature=signing.sign(payload)
        )
        signed += 1
    return signed


# Verification ---------------------------------------------------------------------------------------


@dataclass
class ChainReport:
    """What verify_chains found in one tenant's chain: counts, and the first problem if any."""

    tenant: int
    links: int = 0
    rows: int = 0
    tombstones: int = 0
    redacted: int = 0
    checkpoints: int = 0
    problems: list[str] = field(default_factory=list)


def _row_problem(link: AuditLink, row: models.Model | None) -> str | None:
    where = f"{link.log} row {link.row_ref} (link #{link.seq})"
    if row is None:
        return None if link.removed_at else f"{where} was deleted"
    redacted = getattr(row, "redacted_at", None) is not None
    content, _hashes = sealed_content(row, json_sha256=link.json_sha256 if redacted else None)
    # Only the fields hashed when the row was written: a field added to the log since is not covered.
    if sha256_of({key: content.get(key) for key in link.fields}) != link.content_sha256:
        return f"{where} was edited"
    return None


def _links_in_batches(tenant: int) -> Iterator[list[AuditLink]]:
    after = 0
    while True:
        batch = list(AuditLink.objects.filter(tenant_ref=tenant, seq__gt=after).order_by("seq")[:READ_BATCH])
        if not batch:
            return
        yield batch
        after = batch[-1].seq


def _rows_of(batch: list[AuditLink]) -> dict[tuple[str, int], models.Model]:
    wanted: dict[str, list[int]] = defaultdict(list)
    for link in batch:
        wanted[link.log].append(link.row_ref)
    rows = {}
    for label, ids in wanted.items():
        model = apps.get_model(label)
        for row in model._base_manager.filter(pk__in=ids):
            rows[(label, row.pk)] = row
    return rows


def _verify_links(report: ChainReport, linked: dict[str, set[int]]) -> dict[int, str]:
    """Walk one chain in order; returns {seq: sha256} of every link read, for the checkpoints."""
    heads: dict[int, str] = {}
    prev, expected_seq = GENESIS, 1
    for batch in _links_in_batches(report.tenant):
        rows = _rows_of(batch)
        for link in batch:
            report.links += 1
            linked[link.log].add(link.row_ref)
            heads[link.seq] = link.sha256
            if link.seq != expected_seq:
                report.problems.append(f"links #{expected_seq} to #{link.seq - 1} were deleted from the chain")
            elif link.prev_sha256 != prev:
                report.problems.append(
                    f"link #{link.seq} does not follow link #{link.seq - 1}: the chain was rewritten"
                )
            expected = link_sha256(
                tenant=report.tenant,
                seq=link.seq,
                log=link.log,
                row=link.row_ref,
                content_sha256=link.content_sha256,
                prev_sha256=link.prev_sha256,
            )
            if expected != link.sha256:
                report.problems.append(f"link #{link.seq} ({link.log} row {link.row_ref}) was edited")
            row = rows.get((link.log, link.row_ref))
            problem = _row_problem(link, row)
            if problem:
                report.problems.append(problem)
            report.tombstones += link.removed_at is not None
            report.rows += row is not None
            report.redacted += row is not None and getattr(row, "redacted_at", None) is not None
            prev, expected_seq = link.sha256, link.seq + 1
    return heads


def _verify_checkpoints(report: ChainReport, heads: dict[int, str], trusted: dict[str, str]) -> None:
    for checkpoint in AuditCheckpoint.objects.filter(tenant_ref=report.tenant).order_by("seq"):
        report.checkpoints += 1
        name = f"checkpoint of link #{checkpoint.seq} ({checkpoint.at:%Y-%m-%d %H:%M:%S})"
        public = trusted.get(checkpoint.key_id)
        payload = checkpoint_payload(
            tenant=checkpoint.tenant_ref,
            seq=checkpoint.seq,
            sha256=checkpoint.sha256,
            at=checkpoint.at,
            key_id=checkpoint.key_id,
        )
        if public is None:
            report.problems.append(f"{name} is signed by key {checkpoint.key_id}, which is not a trusted key")
        elif not signing.verify(payload, checkpoint.signature, public):
            report.problems.append(f"{name} has a bad signature: the checkpoint was edited")
        elif checkpoint.seq not in heads:
            report.problems.append(f"{name}: the chain ends before it, so links were deleted from its end")
        elif heads[checkpoint.seq] != checkpoint.sha256:
            report.problems.append(f"{name} does not match link #{checkpoint.seq}: the chain was rewritten")


def _unlinked_rows(linked: dict[str, set[int]]) -> Iterable[str]:
    for model in chained_logs():
        label = model._meta.label
        for pk in model._base_manager.order_by("pk").values_list("pk", flat=True).iterator(chunk_size=READ_BATCH):
            if pk not in linked[label]:
                yield f"{label} row {pk} is in no chain: it was inserted outside Airlock"


def verify_chains(*, trusted_keys: Iterable[str] = ()) -> tuple[list[ChainReport], list[str]]:
    """Check every tenant's chain, its rows and its checkpoints. Returns a report per chain and the rows
    found in no chain. `trusted_keys`: PEM public keys (earlier signing keys) besides the current one."""
    trusted = {signing.key_id(): signing.public_key_pem()}
    for pem in trusted_keys:
        trusted[signing.key_id_of(pem)] = pem
    linked: dict[str, set[int]] = defaultdict(set)
    reports = []
    tenants = set(AuditLink.objects.values_list("tenant_ref", flat=True).distinct())
    tenants |= set(AuditCheckpoint.objects.values_list("tenant_ref", flat=True).distinct())
    for tenant in sorted(tenants):
        report = ChainReport(tenant=tenant)
        heads = _verify_links(report, linked)
        _verify_checkpoints(report, heads, trusted)
        reports.append(report)
    return reports, list(_unlinked_rows(linked))


def link_unlinked_rows() -> int:
    """Link every row that is in no chain, oldest first: rows written before the chain existed. Run once,
    on upgrade (`verify_audit --link-unlinked`); afterwards an unlinked row means a write outside Airlock."""
    linked = 0
    for model in chained_logs():
        label = model._meta.label
        known = set(AuditLink.objects.filter(log=label).values_list("row_ref", flat=True))
        for row in model._base_manager.order_by("pk").iterator(chunk_size=READ_BATCH):
            if row.pk not in known:
                append_link(row)
                linked += 1
    return linked


# Export ---------------------------------------------------------------------------------------------


def export_records(tenant: int) -> Iterator[dict[str, Any]]:
    """What an outsider needs to check one tenant's chain without Airlock (docs/security.md): the public key,
    every link with its row's content as hashed (or none for a tombstone or a missing row), the checkpoints."""
    yield {
        "type": "key",
        "algorithm": "Ed25519",
        "key_id": signing.key_id(),
        "public_key_pem": signing.public_key_pem(),
        "genesis": GENESIS,
    }
    for batch in _links_in_batches(tenant):
        rows = _rows_of(batch)
        for link in batch:
            row = rows.get((link.log, link.row_ref))
            content = None
            if row is not None:
                redacted = getattr(row, "redacted_at", None) is not None
                sealed, _hashes = sealed_content(row, json_sha256=link.json_sha256 if redacted else None)
                content = {key: sealed.get(key) for key in link.fields}
            yield {
                "type": "link",
                "tenant": link.tenant_ref,
                "seq": link.seq,
                "log": link.log,
                "row": link.row_ref,
                "content": content,
                "content_sha256": link.content_sha256,
                "prev_sha256": link.prev_sha256,
                "sha256": link.sha256,
                "removed": link.removed_at is not None,
            }
    for checkpoint in AuditCheckpoint.objects.filter(tenant_ref=tenant).order_by("seq"):
        yield {
            "type": "checkpoint",
            "signed": json.loads(
                checkpoint_payload(
                    tenant=checkpoint.tenant_ref,
                    seq=checkpoint.seq,
                    sha256=checkpoint.sha256,
                    at=checkpoint.at,
                    key_id=checkpoint.key_id,
                )
            ),
            "signature": checkpoint.signature,
        }
