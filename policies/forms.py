import json

from django import forms
from django.core import validators

from console.models import Tenant
from policies import grant_options
from policies.engine import VERDICTS
from policies.models import Scope

VERDICT_CHOICES = [(v, v) for v in VERDICTS]


def _count(skills: list) -> str:
    return f"{len(skills)} skill" if len(skills) == 1 else f"{len(skills)} skills"


class RevokeGrantForm(forms.Form):
    """Why a grant is revoked: asked for on every revocation, kept in the grant's change log."""

    reason = forms.CharField(max_length=500, strip=True, error_messages={"required": "Say why the grant is revoked."})


class GrantForm(forms.Form):
    """A grant picked from what exists: a role of the tenant's agents, a skill or namespace offered to it."""

    agent_role = forms.ChoiceField()
    skill_pattern = forms.ChoiceField(
        label="Skill or namespace",
        help_text="One skill, or a namespace (billing.*): every skill in it, including ones published later.",
    )
    oauth_scopes = forms.CharField(required=False, help_text="Space-separated, optional.")
    expires_at = forms.DateTimeField(required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))

    def __init__(self, *args, tenant: Tenant, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.tenant = tenant
        self.roles = grant_options.agent_roles(tenant)
        self.skills = grant_options.offered_skills(tenant)
        role_field = self.fields["agent_role"]
        role_field.choices = [("", "Choose an agent role…"), *((role, role) for role in self.roles)]
        role_field.error_messages["invalid_choice"] = (
            f"No agent of {tenant.name} has the role “%(value)s”; pick one of its agents' roles."
        )
        namespaces = grant_options.namespace_patterns(self.skills)
        pattern_field = self.fields["skill_pattern"]
        pattern_field.choices = [
            ("", "Choose a skill or namespace…"),
            (
                "Namespaces",
                [(ns, f"{ns} ({_count(grant_options.covered_by(ns, self.skills))})") for ns in namespaces],
            ),
            ("Skills", [(s.name, f"{s.name} ({s.effect})") for s in sorted(self.skills, key=lambda s: s.name)]),
        ]
        pattern_field.error_messages["invalid_choice"] = (
            f"No skill or namespace “%(value)s” is offered to {tenant.name}; pick one from the list."
        )

    def clean_oauth_scopes(self) -> list[str]:
        return sorted(set(self.cleaned_data["oauth_scopes"].split()))

    def clean(self) -> dict:
        data = super().clean()
        role, pattern = data.get("agent_role"), data.get("skill_pattern")
        if role and pattern and grant_options.reaches_nothing(pattern, role, self.skills):
            self.add_error(
                "skill_pattern",
                f"{pattern} is not offered to {role} agents (no allowed_agent_roles of its manifests names the "
                "role): the grant would give them nothing.",
            )
        return data

    def covered(self) -> list[grant_options.OfferedSkill]:
        """The current skills the chosen pattern covers (none while it is not one of the choices)."""
        pattern = (self.data.get("skill_pattern") or "") if self.is_bound else ""
        if pattern not in self.pattern_values():
            return []
        return grant_options.covered_by(pattern, self.skills)

    def pattern_values(self) -> set[str]:
        return set(grant_options.namespace_patterns(self.skills)) | {s.name for s in self.skills}

    def preview(self) -> dict:
        """What the grant as chosen so far would cover: each current skill, whether it reaches the chosen
        role's agents, and the destructive ones among those it reaches."""
        role = (self.data.get("agent_role") or "") if self.is_bound else ""
        role = role if role in self.roles else ""
        rows = [{"skill": skill, "reaches": not role or skill.offered_to_role(role)} for skill in self.covered()]
        return {
            "pattern": self.data.get("skill_pattern", "") if rows else "",
            "role": role,
            "rows": rows,
            "destructive": [row["skill"] for row in rows if row["reaches"] and row["skill"].is_destructive],
            "reaches_none": bool(role) and not any(row["reaches"] for row in rows),
        }


class PolicyCreateForm(forms.Form):
    name = forms.CharField(max_length=200)
    scope = forms.ChoiceField(choices=Scope.choices)
    tenant = forms.CharField(required=False, help_text="Tenant slug, for tenant policies.")
    skill_name = forms.CharField(required=False, max_length=200, help_text="For skill policies.")


class PolicyTestForm(forms.Form):
    name = forms.CharField(max_length=200)
    call = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 5}),
        help_text=(
            'Context fields that differ from the sample, e.g. {"skill": {"name": "support.send_email", '
            '"effect": "external"}, "args": {"to": "x@example.com"}, "run": {"tainted": true}}'
        ),
    )
    expected_verdict = forms.ChoiceField(choices=VERDICT_CHOICES)

    def clean_call(self) -> dict:
        try:
            value = json.loads(self.cleaned_data["call"])
        except ValueError as exc:
            raise forms.ValidationError(f"Not JSON: {exc}") from None
        if not isinstance(value, dict):
            raise forms.ValidationError("Give a JSON object.")
        return value


def rules_from_post(data) -> list[dict]:
    """The editor posts parallel lists (rule_id, verdict, condition, reason) and, for `override_taint`, the
    indexes of the rows whose box is ticked (an unticked checkbox posts nothing). Blank rows are dropped."""
    rows = zip(
        data.getlist("rule_id"),
        data.getlist("verdict"),
        data.getlist("condition"),
        data.getlist("reason"),
        strict=False,
    )
    overriding = set(data.getlist("override_taint"))
    rules = []
    for index, (rid, verdict, condition, reason) in enumerate(rows):
        if not (rid.strip() or condition.strip() or reason.strip()):
            continue
        rule = {"id": rid.strip(), "verdict": verdict, "condition": condition.strip(), "reason": reason.strip()}
        if str(index) in overriding:
            rule["override_taint"] = True
        rules.append(rule)
    return rules


class LocalDecisionsForm(forms.Form):
    """Which of the tenant's agent roles decide client-executed calls locally, and how long a bundle holds."""

    agent_roles = forms.MultipleChoiceField(required=False, widget=forms.CheckboxSelectMultiple)
    bundle_validity_minutes = forms.IntegerField(
        min_value=1,
        label="Bundle holds for (minutes)",
        help_text="Once this passes without reaching Airlock, the agents' local decisions stop.",
    )

    def __init__(self, *args, tenant: Tenant, ceiling_seconds: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["agent_roles"].choices = [(role, role) for role in grant_options.agent_roles(tenant)]
        self.fields["bundle_validity_minutes"].max_value = max(1, ceiling_seconds // 60)
        self.fields["bundle_validity_minutes"].validators.append(
            validators.MaxValueValidator(max(1, ceiling_seconds // 60))
        )
