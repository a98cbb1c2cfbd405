from django import forms

from registry.models import Effect


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("decline", "Decline")])
    reason = forms.CharField(required=False, max_length=2000)
    arguments = forms.CharField(
        required=False,
        widget=forms.Textarea,
        max_length=100_000,
        help_text="Edited arguments as JSON; leave unchanged to approve as proposed.",
    )


class InboxFilterForm(forms.Form):
    tenant = forms.CharField(required=False)
    agent = forms.CharField(required=False)
    skill = forms.CharField(required=False)
    effect = forms.ChoiceField(required=False, choices=[("", "Any effect"), *Effect.choices])
