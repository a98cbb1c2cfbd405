import json

from django import forms
from django.forms.fields import InvalidJSONInput


class StopRunForm(forms.Form):
    reason = forms.CharField(
        max_length=300, help_text="The agent's refusal, the timeline and the cancelled approvals say it."
    )


class IndentedJSONField(forms.JSONField):
    """A JSON field an owner edits by hand: shown indented, one key a line."""

    def prepare_value(self, value):
        if isinstance(value, InvalidJSONInput):
            return value
        return json.dumps(value, indent=2, ensure_ascii=False)


class TryForm(forms.Form):
    """An owner's try of a version: the arguments as JSON, and who the verdict is for."""

    arguments = IndentedJSONField(
        help_text="The call's arguments as JSON; checked against the input schema like an agent's.",
        widget=forms.Textarea(attrs={"rows": 10, "class": "mono", "spellcheck": "false"}),
    )
    role = forms.RegexField(
        regex=r"^[a-z][a-z0-9_-]{0,63}$",
        required=False,
        help_text="The agent role whose verdict you want to see; empty: no verdict.",
    )
    tenant = forms.SlugField(required=False, help_text="Whose grants and policies decide the verdict.")
