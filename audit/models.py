"""The hash chain over every append-only audit log, one chain per tenant, and its signed checkpoints.

Written only by `audit.chain`: a link when an audit row is inserted (`AppendOnlyModel.save`), a tombstone
mark when the application deletes the row, a checkpoint by the periodic task. Tenants are named by id
(`tenant_ref`, 0 for rows of no tenant) rather than by foreign key, so that links outlive their tenant.
"""

from django.db import models
from django.utils import timezone


class AuditLink(models.Model):
    """One audit row's place in its tenant's chain: the hash of its sealed content and of the link before.

    `sha256` = SHA-256 of the RFC 8785 form of {tenant, seq, log, row, fields, content_sha256, prev_sha256}.
    `removed_at` marks a tombstone: the row was deleted by the application (retention, a cascade) and the
    link keeps its hashes, so the chain stays checkable."""

    tenant_ref = models.PositiveBigIntegerField()
    seq = models.PositiveBigIntegerField()
    log = models.CharField(max_length=100, help_text="The audit log's model label, e.g. approvals.ApprovalEvent.")
    row_ref = models.PositiveBigIntegerField(help_text="The audit row's primary key.")
    fields = models.JSONField(default=list, help_text="The names of the fields the content hash covers.")
    content_sha256 = models.CharField(max_length=64)
    json_sha256 = models.JSONField(default=dict, help_text="The hash of each JSON field, kept through redaction.")
    prev_sha256 = models.CharField(max_length=64)
    sha256 = models.CharField(max_length=64)
    created_at = models.DateTimeField(default=timezone.now)
    removed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["tenant_ref", "seq"]
        constraints = [
            models.UniqueConstraint(fields=["tenant_ref", "seq"], name="audit_link_seq_per_tenant"),
            models.UniqueConstraint(fields=["log", "row_ref"], name="audit_link_one_per_row"),
        ]

    def __str__(self) -> str:
        return f"{self.tenant_ref}#{self.seq} {self.log}:{self.row_ref}"


class AuditCheckpoint(models.Model):
    """The head of a tenant's chain at a moment, signed with the deployment's Ed25519 key (lib.signing).

    The signature covers the RFC 8785 form of {tenant, seq, sha256, at, key_id}."""

    tenant_ref = models.PositiveBigIntegerField()
    seq = models.PositiveBigIntegerField()
    sha256 = models.CharField(max_length=64)
    at = models.DateTimeField()
    key_id = models.CharField(max_length=32)
    signature = models.TextField()

    class Meta:
        ordering = ["tenant_ref", "seq"]
        indexes = [models.Index(fields=["tenant_ref", "-seq"], name="audit_checkpoint_head_idx")]

    def __str__(self) -> str:
        return f"{self.tenant_ref}#{self.seq} signed by {self.key_id}"
