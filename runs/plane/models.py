"""The execution plane's tables: MCP servers, tenant credentials and their bindings and audit, breaker history.

The classes live here, with the code that uses them; the tables keep the `reliability` app label (and its
migrations) they were created under, so moving the code moved no table. `reliability.models` imports them
so that Django registers them when it loads that app.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from console.models import Team, Tenant
from console.tenancy import TenantScopedQuerySet
from lib.append_only import AppendOnlyModel
from lib.sealing import seal, unseal
from policies.models import pattern_covers


class McpTransport(models.TextChoices):
    HTTP = "http", "Streamable HTTP"
    STDIO = "stdio", "stdio (local command)"


class McpServerStatus(models.TextChoices):
    """A team's proposal waits for a second person; only an approved server is called or imported from."""

    PROPOSED = "proposed", "waiting for review"
    APPROVED = "approved", "approved"
    DECLINED = "declined", "declined"


class McpServerQuerySet(models.QuerySet):
    def approved(self) -> McpServerQuerySet:
        return self.filter(status=McpServerStatus.APPROVED)

    def visible_to(self, user) -> McpServerQuerySet:
        """A platform admin sees every server; anyone else those of their own teams."""
        if not user.is_authenticated:
            return self.none()
        if user.is_superuser:
            return self.all()
        return self.filter(team__members=user)


class McpServer(models.Model):
    """A registered MCP server reached by `mcp://<name>/<tool>` adapters.

    Connection settings (URL or command, headers with credentials) live here, sealed, so that
    manifests, snapshots and traces only ever name the server. A member of an owning team proposes one
    for the team's skills; another person (a teammate or a platform admin) approves it
    (reliability.services); a platform admin's own registration is approved at once.

    Its headers are its owner's credentials: only skills of its own team, or of a team it is shared with
    (`shared_with`, by a maintainer of the owner or a platform admin), may name it (`usable_by`).
    """

    name = models.SlugField(max_length=63, unique=True)
    team = models.ForeignKey(
        Team, null=True, blank=True, on_delete=models.SET_NULL, related_name="mcp_servers", help_text="Who owns it."
    )
    status = models.CharField(max_length=16, choices=McpServerStatus.choices, default=McpServerStatus.PROPOSED)
    proposed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    reviewed_at = models.DateTimeField(null=True, blank=True)
    transport = models.CharField(max_length=8, choices=McpTransport.choices, default=McpTransport.HTTP)
    url = models.URLField(max_length=500, blank=True, help_text="Streamable HTTP endpoint, e.g. https://host/mcp.")
    command = models.CharField(max_length=500, blank=True, help_text="For stdio: the command line that starts it.")
    headers_sealed = models.TextField(blank=True, help_text="Extra HTTP headers (credentials), sealed.")
    shared_with = models.ManyToManyField(
        Team, blank=True, related_name="shared_mcp_servers", help_text="Other teams whose skills may call it."
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = McpServerQuerySet.as_manager()

    class Meta:
        app_label = "reliability"
        ordering = ["name"]

    def __str__(self) -> str:
        return self.name

    @property
    def owner_label(self) -> str:
        return f"the {self.team.slug} team" if self.team_id else "the platform (no team)"

    def usable_by(self, team_slug: str) -> bool:
        """Whether skills owned by `team_slug` may call it: approved, and their team's or shared with it."""
        if self.status != McpServerStatus.APPROVED or not team_slug:
            return False
        if self.team_id is not None and self.team.slug == team_slug:
            return True
        return self.shared_with.filter(slug=team_slug).exists()

    def set_headers(self, headers: dict[str, str]) -> None:
        self.headers_sealed = seal(headers) if headers else ""

    def headers(self) -> dict[str, str]:
        return unseal(self.headers_sealed) if self.headers_sealed else {}


class McpServerAction(models.TextChoices):
    SHARED = "shared"
    UNSHARED = "unshared"


class McpServerEvent(AppendOnlyModel):
    """The append-only history of who shared an MCP server with which team, and who took the share back.

    Labels keep the names readable after the server, the team or the user is deleted."""

    append_only_message = "The MCP server audit log is append-only."

    server = models.ForeignKey(McpServer, null=True, on_delete=models.SET_NULL, related_name="events")
    server_name = models.CharField(max_length=63)
    action = models.CharField(max_length=16, choices=McpServerAction.choices)
    team = models.ForeignKey(Team, null=True, on_delete=models.SET_NULL, related_name="+")
    team_label = models.CharField(max_length=63)
    actor = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, on_delete=models.SET_NULL, related_name="+")
    actor_label = models.CharField(max_length=150, help_text="Who acted, kept even if the user is deleted.")
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        app_label = "reliability"
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.actor_label} {self.action} {self.server_name} with {self.team_label}"


class McpToolPin(models.Model):
    """One MCP tool's definition (name, description, schemas, annotations) as its team reviewed it, pinned by
    hash (runs/plane/tool_pins.py). A server that later serves another definition for it is not called for it
    until a member of the server's team reviews the change, kept here as pending."""

    server = models.ForeignKey(McpServer, on_delete=models.CASCADE, related_name="tool_pins")
    tool = models.CharField(max_length=200)
    definition = models.JSONField(help_text="The reviewed definition.")
    sha256 = models.CharField(max_length=64)
    pinned_by_label = models.CharField(max_length=150, blank=True, help_text="Who reviewed it, kept as text.")
    pinned_at = models.DateTimeField(default=timezone.now)
    pending_definition = models.JSONField(null=True, blank=True, help_text="What the server serves instead.")
    pending_sha256 = models.CharField(max_length=64, blank=True)
    pending_since = models.DateTimeField(null=True, blank=True)
    pending_findings = models.JSONField(default=list, blank=True, help_text="What the scan found in it.")

    class Meta:
        app_label = "reliability"
        ordering = ["server__name", "tool"]
        constraints = [models.UniqueConstraint(fields=["server", "tool"], name="unique_tool_pin")]

    def __str__(self) -> str:
        return f"{self.server.name}/{self.tool} pinned at {self.sha256[:12]}"


class CredentialQuerySet(TenantScopedQuerySet):
    pass


class Credential(models.Model):
    """A tenant's secret for a downstream service, referenced by name (`execution.credential`).

    Sealed at rest; attached by the adapter at execution only; never returned by any page or API.
    An empty `end_user` serves every end user; a row for one end user wins over it.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="credentials")
    name = models.SlugField(max_length=100, help_text="The name manifests use, e.g. zendesk_token.")
    end_user = models.CharField(max_length=200, blank=True, help_text="Only for this end user (blank: all).")
    header = models.CharField(max_length=100, default="Authorization")
    scheme = models.CharField(max_length=30, default="Bearer", blank=True, help_text="Prefix, e.g. Bearer.")
    sealed_value = models.TextField()
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)
    rotated_at = models.DateTimeField(null=True, blank=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    objects = CredentialQuerySet.as_manager()

    class Meta:
        app_label = "reliability"
        ordering = ["name", "end_user"]
        constraints = [models.UniqueConstraint(fields=["tenant", "name", "end_user"], name="unique_credential")]

    def __str__(self) -> str:
        return f"{self.name} ({self.tenant})"

    def header_value(self) -> str:
        value = unseal(self.sealed_value)
        return f"{self.scheme} {value}" if self.scheme else value


class CredentialBindingQuerySet(TenantScopedQuerySet):
    pass


class CredentialBinding(models.Model):
    """Where a tenant lets one of its credentials go: skills (a name, or `namespace.*`) at one endpoint.

    A credential is attached to a request only when a binding of the calling tenant covers both the
    skill's name and the endpoint the request goes to (`lib.endpoints.endpoint_of`: `https://host[:port]`,
    `mcp://server`, `python:module.function`). Skill owners cannot write these: tenant admins do,
    through `reliability.services`, and every change leaves a `CredentialAudit` row.
    """

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="credential_bindings")
    credential_name = models.SlugField(max_length=100)
    skill_pattern = models.CharField(max_length=200, help_text="customer.read_profile, or customer.* for a namespace.")
    endpoint = models.CharField(max_length=300, help_text="https://api.example.com[:port], mcp://server or python:f.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(default=timezone.now)

    objects = CredentialBindingQuerySet.as_manager()

    class Meta:
        app_label = "reliability"
        ordering = ["credential_name", "skill_pattern", "endpoint"]
        constraints = [
            models.UniqueConstraint(
                fields=["tenant", "credential_name", "skill_pattern", "endpoint"], name="unique_credential_binding"
            )
        ]

    def __str__(self) -> str:
        return f"{self.credential_name}: {self.skill_pattern} at {self.endpoint} ({self.tenant})"

    def covers(self, *, skill_name: str, endpoint: str) -> bool:
        return self.endpoint == endpoint and pattern_covers(self.skill_pattern, skill_name)


class CredentialAction(models.TextChoices):
    SAVED = "saved"
    ROTATED = "rotated"
    DELETED = "deleted"
    BOUND = "bound"
    UNBOUND = "unbound"


class CredentialAuditQuerySet(TenantScopedQuerySet):
    pass


class CredentialAudit(AppendOnlyModel):
    """The append-only history of a tenant's credentials and bindings: who, when, what changed (never a value)."""

    append_only_message = "The credential audit log is append-only."

    tenant = models.ForeignKey(Tenant, on_delete=models.CASCADE, related_name="+")
    credential_name = models.SlugField(max_length=100)
    action = models.CharField(max_length=16, choices=CredentialAction.choices)
    detail = models.JSONField(default=dict, blank=True, help_text="skill_pattern, endpoint, end_user, note.")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    actor_label = models.CharField(max_length=200, help_text="Who acted, kept even if the user is deleted.")
    at = models.DateTimeField(default=timezone.now, db_index=True)

    objects = CredentialAuditQuerySet.as_manager()

    class Meta:
        app_label = "reliability"
        ordering = ["-at", "-id"]


class BreakerTransition(models.Model):
    """One state change of a circuit breaker, for the skill page and the owners' alert."""

    domain = models.CharField(max_length=300, db_index=True)
    skill_name = models.CharField(max_length=200, db_index=True)
    tenant = models.ForeignKey(Tenant, null=True, blank=True, on_delete=models.CASCADE, related_name="+")
    from_state = models.CharField(max_length=10)
    to_state = models.CharField(max_length=10)
    detail = models.CharField(max_length=300, blank=True)
    at = models.DateTimeField(default=timezone.now, db_index=True)

    class Meta:
        app_label = "reliability"
        ordering = ["-at"]
