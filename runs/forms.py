from django import forms


class StopRunForm(forms.Form):
    reason = forms.CharField(
        max_length=300, help_text="The agent's refusal, the timeline and the cancelled approvals say it."
    )
