from datetime import timedelta

from django import forms

from lib.egress import EgressRefused, check_url
from traces.models import AlertKind

WINDOW_CHOICES = [("15m", "15 minutes"), ("1h", "1 hour"), ("6h", "6 hours"), ("24h", "24 hours"), ("7d", "7 days")]
WINDOW_VALUES = {
    "15m": timedelta(minutes=15),
    "1h": timedelta(hours=1),
    "6h": timedelta(hours=6),
    "24h": timedelta(hours=24),
    "7d": timedelta(days=7),
}


class TraceFilterForm(forms.Form):
    tenant = forms.CharField(required=False)
    agent = forms.CharField(required=False)
    end_user = forms.CharField(required=False)
    skill = forms.CharField(required=False)
    verdict = forms.ChoiceField(
        required=False, choices=[("", "any verdict"), ("allow", "allow"), ("confirm", "confirm"), ("deny", "deny")]
    )
    outcome = forms.CharField(required=False)
    error_class = forms.CharField(required=False)
    since = forms.DateTimeField(required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))
    until = forms.DateTimeField(required=False, widget=forms.DateTimeInput(attrs={"type": "datetime-local"}))


class AlertRuleForm(forms.Form):
    kind = forms.ChoiceField(choices=AlertKind.choices)
    threshold = forms.FloatField(min_value=0, help_text="Error rate as a fraction (0.2 = 20%), or a count.")
    window = forms.ChoiceField(choices=WINDOW_CHOICES, initial="1h")
    min_calls = forms.IntegerField(
        min_value=1, initial=10, required=False, help_text="Error-rate rules ignore windows with fewer calls."
    )

    def clean(self):
        data = super().clean()
        if data.get("kind") == AlertKind.ERROR_RATE and data.get("threshold") is not None and data["threshold"] > 1:
            self.add_error("threshold", "An error rate is a fraction between 0 and 1.")
        return data

    @property
    def window_value(self) -> timedelta:
        return WINDOW_VALUES[self.cleaned_data["window"]]


class TraceSettingsForm(forms.Form):
    retention_days = forms.IntegerField(min_value=1, max_value=3650, help_text="Traces older than this are deleted.")
    context_budget = forms.IntegerField(
        required=False,
        min_value=100,
        max_value=10_000_000,
        label="Default context budget (tokens)",
        help_text="Tokens of tool results a run's model is given before the oldest are replaced by a summary "
        "and a ref (describe_result), for runs that set none. Empty: no budget. Applies to runs started after.",
    )
    forward_enabled = forms.BooleanField(required=False, label="Forward spans")
    forward_endpoint = forms.URLField(
        required=False,
        max_length=500,
        assume_scheme="https",
        help_text="OTLP/HTTP traces URL, e.g. https://collector.example:4318/v1/traces",
    )
    forward_headers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="One 'Name: value' per line (stored sealed). Leave empty to keep.",
    )

    def clean_forward_endpoint(self) -> str:
        """The egress guard's verdict now: a collector on a private or loopback address is refused here."""
        endpoint = self.cleaned_data["forward_endpoint"]
        if endpoint:
            try:
                check_url(endpoint)
            except EgressRefused as exc:
                raise forms.ValidationError(str(exc)) from exc
        return endpoint

    def clean_forward_headers(self) -> dict[str, str] | None:
        text = self.cleaned_data["forward_headers"].strip()
        if not text:
            return None
        headers = {}
        for line in text.splitlines():
            name, sep, value = line.partition(":")
            if not sep or not name.strip():
                raise forms.ValidationError(f"Not a 'Name: value' line: {line!r}")
            headers[name.strip()] = value.strip()
        return headers

    def clean(self):
        data = super().clean()
        if data.get("forward_enabled") and not data.get("forward_endpoint") and "forward_endpoint" not in self.errors:
            self.add_error("forward_endpoint", "Forwarding needs an endpoint.")
        return data
