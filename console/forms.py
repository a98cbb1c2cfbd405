from datetime import timedelta

from django import forms
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.validators import UnicodeUsernameValidator
from django.core.validators import MaxValueValidator, validate_email

from console.models import MAX_KEY_GRACE, MAX_SUSPENSION, Role, Team, Tenant, TokenScope, slug_validator

MAX_GRACE_HOURS = int(MAX_KEY_GRACE.total_seconds() // 3600)


class MemberRolesForm(forms.Form):
    roles = forms.MultipleChoiceField(
        choices=Role.choices,
        widget=forms.CheckboxSelectMultiple,
        required=False,
        help_text="Untick every role to remove the member from this tenant.",
    )


def clean_address(value: str) -> str:
    """An e-mail address (lowercased) or an exact username, checked for shape only."""
    address = value.strip()
    if "@" in address:
        validate_email(address)
        return address.lower()
    UnicodeUsernameValidator()(address)
    if len(address) > 150:
        raise forms.ValidationError("A username has at most 150 characters.")
    return address


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
        return clean_address(self.cleaned_data["address"])


class _SlugFormMixin:
    """A new tenant's or team's slug: its shape, and whether another already has it."""

    slug_model: type = Tenant

    def clean_slug(self) -> str:
        slug = self.cleaned_data["slug"].strip()
        slug_validator(slug)
        if self.slug_model.objects.filter(slug=slug).exists():
            raise forms.ValidationError(f"The slug {slug} is taken; choose another.")
        return slug


class TenantForm(_SlugFormMixin, forms.Form):
    name = forms.CharField(max_length=200, help_text="The organisation, for example Acme Corp.")
    slug = forms.CharField(max_length=63, help_text="Lowercase letters, digits and hyphens; used in URLs and API.")
    first_admin = forms.CharField(
        max_length=254,
        label="First admin (e-mail address or exact username)",
        help_text="Invited as admin; they manage the tenant once they accept.",
    )

    def clean_first_admin(self) -> str:
        return clean_address(self.cleaned_data["first_admin"])


class TeamForm(_SlugFormMixin, forms.Form):
    slug_model = Team

    name = forms.CharField(max_length=200, help_text="For example Billing skills.")
    slug = forms.CharField(max_length=63, help_text="Lowercase letters, digits and hyphens; manifests name it.")
    maintainer = forms.CharField(max_length=150, label="First maintainer (exact username)")

    def clean_maintainer(self):
        return _existing_user(self.cleaned_data["maintainer"])


def _existing_user(username: str):
    user = get_user_model().objects.filter(username=username.strip()).first()
    if user is None:
        raise forms.ValidationError(f"No account has the username {username.strip()!r}.")
    return user


class TeammateForm(forms.Form):
    """Owning teams are small and their maintainers trusted: a teammate is named by exact username."""

    username = forms.CharField(max_length=150, label="Username")

    def clean_username(self):
        return _existing_user(self.cleaned_data["username"])


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


class SuspendAgentForm(forms.Form):
    reason = forms.CharField(max_length=300, help_text="The agent is told, and the audit log keeps it.")
    minutes = forms.IntegerField(
        required=False,
        min_value=1,
        max_value=int(MAX_SUSPENSION.total_seconds() // 60),
        label="For (minutes)",
        help_text="Leave empty to suspend until you resume it.",
    )

    @property
    def duration(self) -> timedelta | None:
        minutes = self.cleaned_data.get("minutes")
        return timedelta(minutes=minutes) if minutes else None


class FreezeTenantForm(forms.Form):
    reason = forms.CharField(max_length=300, help_text="Shown in the banner on every page and in refused calls.")
