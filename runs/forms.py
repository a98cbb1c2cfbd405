from django import forms


class StopRunForm(forms.Form):
    reason = forms.CharField(
        max_length=300, help_text="The agent's refusal, the timeline and the cancelled approvals say it."
    )


class TryForm(forms.Form):
    """An owner's try of a version: the arguments as JSON, and who the verdict is for."""

    arguments = forms.JSONField(
        help_text="The call's arguments as JSON; checked against the input schema like an agent's.",
        widget=forms.Textarea(attrs={"rows": 10, "class": "mono", "spellcheck": "false"}),
    )
    role = forms.RegexField(
        regex=r"^[a-z][a-z0-9_-]{0,63}$",
        required=False,
        help_text="The agent role whose verdict you want to see; empty: no verdict.",
    )
    tenant = forms.SlugField(required=False, help_text="Whose grants and policies decide the verdict.")
