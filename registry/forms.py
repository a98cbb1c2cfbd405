import json

from django import forms

from console.models import Team
from registry.models import DataClassification, Effect, Skill, VersionStatus


class CatalogFilterForm(forms.Form):
    q = forms.CharField(
        required=False, widget=forms.TextInput(attrs={"type": "search", "placeholder": "Search skills"})
    )
    namespace = forms.ChoiceField(required=False)
    effect = forms.ChoiceField(required=False, choices=[("", "Any effect"), *Effect.choices])
    status = forms.ChoiceField(required=False, choices=[("", "Any status"), *VersionStatus.choices])
    owner = forms.ModelChoiceField(
        required=False, queryset=Team.objects.all(), to_field_name="slug", empty_label="Any owner"
    )
    data_class = forms.ChoiceField(required=False, choices=[("", "Any data class"), *DataClassification.choices])

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        namespaces = Skill.objects.order_by("namespace").values_list("namespace", flat=True).distinct()
        self.fields["namespace"].choices = [("", "Any namespace"), *[(n, n) for n in namespaces]]


class ManifestForm(forms.Form):
    manifest = forms.CharField(widget=forms.Textarea(attrs={"rows": 30, "spellcheck": "false"}))

    def clean_manifest(self) -> dict:
        try:
            value = json.loads(self.cleaned_data["manifest"])
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(
                f"Not valid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}."
            ) from None
        if not isinstance(value, dict):
            raise forms.ValidationError("The manifest must be a JSON object.")
        return value


class DeprecateForm(forms.Form):
    replacement = forms.ModelChoiceField(
        queryset=Skill.objects.none(), required=False, to_field_name="name", empty_label="No replacement"
    )
    sunset_at = forms.DateTimeField(
        required=False,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
        help_text="After this, even exact-version calls are refused.",
    )

    def __init__(self, *args, skill: Skill, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["replacement"].queryset = (
            Skill.objects.exclude(pk=skill.pk).filter(versions__status=VersionStatus.ACTIVE).distinct().order_by("name")
        )


class ImportMcpForm(forms.Form):
    target = forms.CharField(max_length=500, help_text="Streamable-HTTP URL, e.g. http://127.0.0.1:8765/mcp")
    team = forms.ModelChoiceField(queryset=Team.objects.none(), to_field_name="slug")
    server_name = forms.SlugField(required=False, help_text="Namespace segment; default: the server's own name.")

    def __init__(self, *args, teams, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams

    def clean_target(self) -> str:
        target = self.cleaned_data["target"].strip()
        if not target.startswith(("http://", "https://")):
            # Commands run on the server: only operators may use them, through manage.py import_mcp.
            raise forms.ValidationError("Give the server's http(s) URL; use manage.py import_mcp for stdio commands.")
        return target


class NamespaceClaimForm(forms.Form):
    namespace = forms.CharField(max_length=100, help_text="For example billing or support.email.")
    team = forms.ModelChoiceField(queryset=Team.objects.none(), to_field_name="slug", empty_label=None)

    def __init__(self, *args, teams, **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["team"].queryset = teams


class RolloutForm(forms.Form):
    """The rollout panel's stage: canary tenants or a share of runs (registry.rollouts checks which and how)."""

    tenants = forms.CharField(
        required=False, max_length=2000, widget=forms.TextInput(attrs={"placeholder": "tenant slugs, comma-separated"})
    )
    percent = forms.CharField(required=False, max_length=10, widget=forms.TextInput(attrs={"placeholder": "1 to 99"}))
    publish = forms.BooleanField(required=False, widget=forms.HiddenInput)

    def stage(self) -> dict:
        raw_percent = self.cleaned_data["percent"].strip()
        tenants = [slug.strip() for slug in self.cleaned_data["tenants"].split(",") if slug.strip()]
        stage: dict = {"publish": self.cleaned_data["publish"]}
        if raw_percent:
            stage["percent"] = int(raw_percent) if raw_percent.isdigit() else raw_percent
        if tenants:
            stage["tenants"] = tenants
        return stage


class EvaluationUploadForm(forms.Form):
    """An owner's labelled intents: one JSON object per line, {"intent": "...", "expected": ["ns.skill"]}."""

    namespace = forms.ChoiceField()
    name = forms.SlugField(max_length=80, initial="intents", help_text="Uploading under an existing name replaces it.")
    file = forms.FileField(
        allow_empty_file=True, help_text='JSONL: {"intent": "...", "expected": ["ns.skill", ...]} per line, up to 1 MB.'
    )

    def __init__(self, *args, namespaces: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["namespace"].choices = [(n, n) for n in namespaces]


class SearchedIntentForm(forms.Form):
    """Label one recorded zero-result search with the skill the user meant."""

    search_id = forms.IntegerField(min_value=1, widget=forms.HiddenInput)
    expected = forms.ChoiceField()

    def __init__(self, *args, skills: list[str], **kwargs):
        super().__init__(*args, **kwargs)
        self.fields["expected"].choices = [(name, name) for name in skills]
