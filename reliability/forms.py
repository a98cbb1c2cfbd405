from django import forms

from console.models import Team
from lib.egress import EgressRefused, check_url
from reliability.models import McpTransport, Resolution


class ResolveForm(forms.Form):
    resolution = forms.ChoiceField(
        choices=Resolution.choices, widget=forms.RadioSelect, help_text="What really happened downstream."
    )
    note = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 3}),
        max_length=2000,
        help_text="How you know (a ticket, a log line, the downstream console).",
    )


class CredentialForm(forms.Form):
    name = forms.SlugField(max_length=100, help_text="The name manifests use in execution.credential.")
    value = forms.CharField(
        widget=forms.PasswordInput(render_value=False), max_length=4000, help_text="Stored sealed; never shown again."
    )
    end_user = forms.CharField(max_length=200, required=False, help_text="Only for this end user (blank: all).")
    header = forms.CharField(max_length=100, initial="Authorization")
    scheme = forms.CharField(max_length=30, initial="Bearer", required=False)


class CredentialBindingForm(forms.Form):
    skill_pattern = forms.CharField(
        max_length=200, label="Skills", help_text="One skill (customer.read_profile) or a namespace (customer.*)."
    )
    endpoint = forms.CharField(
        max_length=300,
        label="Endpoint",
        help_text="https://host[:port] (a URL is cut to its origin), mcp://<server> or python:<module.function>.",
    )


def parse_header_lines(form: forms.Form, text: str) -> dict[str, str]:
    """`Header: value` lines as a dict; a malformed line is an error on the form's headers field."""
    headers = {}
    for line in (text or "").splitlines():
        if line.strip():
            key, sep, value = line.partition(":")
            if not sep or not key.strip():
                form.add_error("headers", f"Not a header line: {line[:40]}")
                break
            headers[key.strip()] = value.strip()
    return headers


class McpServerProposalForm(forms.Form):
    """A team member proposes a streamable-HTTP server; another person approves it before anything calls it."""

    team = forms.ModelChoiceField(queryset=Team.objects.none(), to_field_name="slug", empty_label=None)
    name = forms.SlugField(max_length=63, help_text="Adapters say mcp://<name>/<tool>.")
    url = forms.URLField(label="URL", max_length=500, assume_scheme="https", help_text="e.g. https://host/mcp")
    headers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="One 'Header: value' a line; stored sealed, never shown again.",
    )

    def __init__(self, *args, teams, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams

    def clean(self):
        data = super().clean()
        data["headers"] = parse_header_lines(self, data.get("headers") or "")
        return data


class McpServerShareForm(forms.Form):
    """The team a server's maintainers share it with, or take the share back from."""

    team = forms.ModelChoiceField(
        queryset=Team.objects.all(), to_field_name="slug", error_messages={"invalid_choice": "No such team."}
    )


class McpServerForm(forms.Form):
    name = forms.SlugField(max_length=63, help_text="Adapters say mcp://<name>/<tool>.")
    transport = forms.ChoiceField(choices=McpTransport.choices)
    url = forms.URLField(label="URL", required=False, max_length=500, assume_scheme="https")
    command = forms.CharField(required=False, max_length=500)
    headers = forms.CharField(
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text="One 'Header: value' a line; stored sealed, never shown again.",
    )

    def clean(self):
        data = super().clean()
        if data.get("transport") == McpTransport.HTTP and not data.get("url"):
            self.add_error("url", "Streamable HTTP needs the server's URL.")
        elif data.get("transport") == McpTransport.HTTP:
            try:
                check_url(data["url"])  # the egress guard's verdict now; calls are checked again when made
            except EgressRefused as exc:
                self.add_error("url", str(exc))
        if data.get("transport") == McpTransport.STDIO and not data.get("command"):
            self.add_error("command", "stdio needs the command that starts the server.")
        data["headers"] = parse_header_lines(self, data.get("headers") or "")
        return data
