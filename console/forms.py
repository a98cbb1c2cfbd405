from django import forms
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.validators import validate_email

from console.models import Role


class MemberRolesForm(forms.Form):
    roles = forms.MultipleChoiceField(
        choices=Role.choices, widget=forms.CheckboxSelectMultiple, required=False,
        help_text="Untick every role to remove the member from this tenant.",
    )


class InvitationForm(forms.Form):
    """Whom to invite: checked for shape only. Nothing here asks whether an account exists."""

    address = forms.CharField(
        max_length=254, label="E-mail address or exact username",
        help_text="They become a member only when they accept. You get the same answer whether or not an "
                  "account matches.",
    )
    roles = forms.MultipleChoiceField(choices=Role.choices, widget=forms.CheckboxSelectMultiple)

    def clean_address(self) -> str:
        address = self.cleaned_data["address"].strip()
        if "@" in address:
            validate_email(address)
            return address.lower()
        UnicodeUsernameValidator()(address)
        if len(address) > 150:
            raise forms.ValidationError("A username has at most 150 characters.")
        return address


class AgentForm(forms.Form):
    name = forms.SlugField(max_length=100, help_text="Lowercase, for example support-bot.")
    role = forms.SlugField(max_length=64, help_text="The agent role grants refer to, for example support.")

    def __init__(self, *args, tenant=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.tenant = tenant

    def clean_name(self):
        name = self.cleaned_data["name"]
        if self.tenant is not None and self.tenant.agents.filter(name=name).exists():
            raise forms.ValidationError("This tenant already has an agent with that name.")
        return name


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What will use it, for example slack-bot.")
