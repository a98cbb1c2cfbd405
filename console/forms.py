from django import forms
from django.contrib.auth import get_user_model

from console.models import Role


class MemberRolesForm(forms.Form):
    roles = forms.MultipleChoiceField(
        choices=Role.choices, widget=forms.CheckboxSelectMultiple, required=False,
        help_text="Untick every role to remove the member from this tenant.",
    )


class MemberAddForm(MemberRolesForm):
    username = forms.CharField(max_length=150)
    roles = forms.MultipleChoiceField(choices=Role.choices, widget=forms.CheckboxSelectMultiple)

    def clean_username(self):
        username = self.cleaned_data["username"]
        try:
            return get_user_model().objects.get(username=username, is_active=True)
        except get_user_model().DoesNotExist:
            raise forms.ValidationError(f"No active user is called {username!r}.") from None


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
