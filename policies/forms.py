import json

from django import forms

from policies.engine import VERDICTS
from policies.models import Scope

VERDICT_CHOICES = [(v, v) for v in VERDICTS]


class GrantForm(forms.Form):
    skill_pattern = forms.RegexField(
        regex=r"^[a-z0-9_]+(\.[a-z0-9_]+)*(\.\*)?$",
        max_length=200,
        help_text="One skill (billing.create_refund_request) or a namespace (billing.*).",
    )
    agent_role = forms.RegexField(regex=r"^[a-z][a-z0-9_-]{0,63}$", max_length=64)
    oauth_scopes = forms.CharField(required=False, help_text="Space-separated, optional.")
    expires_at = forms.DateTimeField(required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))

    def clean_oauth_scopes(self) -> list[str]:
        return sorted(set(self.cleaned_data["oauth_scopes"].split()))


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
