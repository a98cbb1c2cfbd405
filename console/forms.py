from datetime import timedelta

from django import forms
from django.conf import settings
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.validators import MaxValueValidator, validate_email

from console.models import MAX_KEY_GRACE, Role, TokenScope

MAX_GRACE_HOURS = int(MAX_KEY_GRACE.total_seconds() // 3600)


class MemberRolesForm(forms.Form):
    roles = forms.MultipleChoiceField(
        choices=Role.choices,
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="Untick every role to remove the member from this tenant.",
    )


class InvitationForm(forms.Form):
    """Whom to invite: checked for shape only. Nothing here asks whether an account exists."""

    address = forms.CharField(
        max_length=254,
        label="E-mail address or exact username",
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


class RotateKeyForm(forms.Form):
    """How long the agent's current key keeps working after the rotation that replaces it."""

    grace_hours = forms.IntegerField(
        label="Old key keeps working for (hours)",
        initial=24,
        min_value=0,
        max_value=MAX_GRACE_HOURS,
        help_text=f"0 stops the old key at once; at most {MAX_GRACE_HOURS} hours (30 days). You can cut it off "
        "earlier at any time.",
        error_messages={"required": "Say how many hours the old key keeps working (0 to stop it at once)."},
    )

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["grace_hours"].widget.attrs.update(min=0, max=MAX_GRACE_HOURS)

    @property
    def grace(self) -> timedelta:
        return timedelta(hours=self.cleaned_data["grace_hours"])


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="What will use it, for example slack-bot.")
    scopes = forms.MultipleChoiceField(
        choices=TokenScope.choices,
        widget=forms.CheckboxSelectMultiple,
        initial=[TokenScope.READ],
        help_text="Read: list and view requests. Approve: decide them (and any other change your roles allow "
        "through the API). A token without Approve is read-only.",
        error_messages={"required": "Choose at least one scope."},
    )
    expires_in_days = forms.IntegerField(label="Expires in (days)", min_value=1)

    def __init__(self, *args, **kwargs) -> None:
        """The lifetime's default and ceiling come from settings, read when the form is made."""
        super().__init__(*args, **kwargs)
        days = self.fields["expires_in_days"]
        days.initial = settings.AIRLOCK_TOKEN_DEFAULT_DAYS
        days.max_value = settings.AIRLOCK_TOKEN_MAX_DAYS
        days.validators.append(MaxValueValidator(settings.AIRLOCK_TOKEN_MAX_DAYS))
        days.widget.attrs.update(max=settings.AIRLOCK_TOKEN_MAX_DAYS, min=1)
        days.help_text = f"The token stops working after this many days (at most {settings.AIRLOCK_TOKEN_MAX_DAYS})."
