from django import forms
from django.core.exceptions import ValidationError
from django.core.validators import URLValidator

from approvals.models import DIGEST_MINUTES_MAX, DIGEST_MINUTES_MIN, NotifyMode
from approvals.queries import GROUP_ALL, GROUP_MINE
from approvals.webhooks import UnsafeCallbackURL, check_notification_url
from registry.models import Effect


class DecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("decline", "Decline"), ("answer", "Answer")])
    reason = forms.CharField(required=False, max_length=2000)
    answer = forms.CharField(required=False, max_length=2000, strip=False)
    arguments = forms.CharField(
        required=False,
        widget=forms.Textarea,
        max_length=100_000,
        help_text="Edited arguments as JSON; leave unchanged to approve as proposed.",
    )


class IdListField(forms.Field):
    """Request ids posted as repeated `ids` fields; at most queue.BULK_LIMIT are taken."""

    widget = forms.MultipleHiddenInput

    def to_python(self, value) -> list[int]:
        try:
            ids = [int(v) for v in value or []]
        except (TypeError, ValueError):
            raise forms.ValidationError("Request ids are whole numbers.") from None
        if any(pk < 1 for pk in ids):
            raise forms.ValidationError("Request ids are whole numbers.")
        return ids


class BulkDecisionForm(forms.Form):
    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("decline", "Decline"), ("answer", "Answer")])
    reason = forms.CharField(required=False, max_length=2000)
    answer = forms.CharField(required=False, max_length=2000, strip=False)
    ids = IdListField()


class CancelForm(forms.Form):
    reason = forms.CharField(max_length=2000, help_text="Shown to the agent and kept in the audit log.")


class InboxFilterForm(forms.Form):
    tenant = forms.CharField(required=False)
    agent = forms.CharField(required=False)
    skill = forms.CharField(required=False)
    effect = forms.ChoiceField(required=False, choices=[("", "Any effect"), *Effect.choices])
    group = forms.ChoiceField(
        required=False,
        choices=[(GROUP_MINE, "Routed to me"), (GROUP_ALL, "All requests (admins)")],
    )


class NotificationChannelsForm(forms.Form):
    """A tenant admin's channels: the webhook (Slack-compatible) and e-mail on or off."""

    webhook_url = forms.CharField(
        required=False,
        max_length=500,
        label="Webhook URL",
        help_text="A Slack incoming webhook, or any https endpoint that accepts the same JSON. Leave empty for none.",
    )
    email_enabled = forms.BooleanField(required=False, label="E-mail approvers (as each of them chooses)")
    slack_signing_secret = forms.CharField(
        required=False,
        max_length=200,
        label="Slack signing secret",
        widget=forms.PasswordInput(render_value=False),
        help_text="From your Slack app's Basic Information page: adds Approve and Decline buttons to the "
        "messages. Leave empty to keep the one saved.",
    )
    forget_slack_secret = forms.BooleanField(required=False, label="Forget the Slack signing secret (no buttons)")

    def clean_slack_signing_secret(self) -> str:
        secret = self.cleaned_data["slack_signing_secret"].strip()
        if secret and not (16 <= len(secret) <= 200 and secret.isalnum()):
            raise ValidationError("A Slack signing secret is a string of letters and digits (32 of them).")
        return secret

    def clean_webhook_url(self) -> str:
        url = self.cleaned_data["webhook_url"].strip()
        if not url:
            return ""
        try:
            URLValidator(schemes=["http", "https"])(url)
        except ValidationError:
            raise ValidationError(
                "Enter a full https:// URL, such as the one Slack gives an incoming webhook."
            ) from None
        try:
            check_notification_url(url)
        except UnsafeCallbackURL as exc:
            raise ValidationError(f"Airlock may not send to this URL: {exc}.") from None
        return url


class NotificationPreferenceForm(forms.Form):
    """One approver's own choice for one tenant."""

    mode = forms.ChoiceField(choices=NotifyMode.choices, widget=forms.RadioSelect, label="E-mail me")
    digest_minutes = forms.IntegerField(
        min_value=DIGEST_MINUTES_MIN,
        max_value=DIGEST_MINUTES_MAX,
        initial=60,
        label="Digest every (minutes)",
        help_text=f"From {DIGEST_MINUTES_MIN} minutes to {DIGEST_MINUTES_MAX // 60} hours.",
    )


class DecisionFilterForm(forms.Form):
    """The decision history's filters (page, export and API alike); dates are whole UTC days, both included."""

    skill = forms.CharField(required=False, max_length=200)
    approver = forms.CharField(required=False, max_length=200, help_text="The username who decided, or 'system'.")
    outcome = forms.ChoiceField(
        required=False,
        choices=[
            ("", "Any outcome"),
            ("approved", "Approved (edited or not)"),
            ("edited", "Approved with edits"),
            ("vote", "First approval of two"),
            ("declined", "Declined"),
            ("expired", "Expired"),
            ("cancelled", "Cancelled"),
        ],
    )
    agent = forms.CharField(required=False, max_length=100)
    date_from = forms.DateField(required=False, label="From", help_text="YYYY-MM-DD")
    date_to = forms.DateField(required=False, label="To", help_text="YYYY-MM-DD, included")

    def clean(self) -> dict:
        data = super().clean()
        if data.get("date_from") and data.get("date_to") and data["date_from"] > data["date_to"]:
            raise ValidationError("The start date is after the end date.", code="date_order")
        return data

    def error_summary(self) -> str:
        """One line naming each refused filter, for a 400."""
        return "; ".join(
            f"{name}: {' '.join(errors)}" if name != "__all__" else " ".join(errors)
            for name, errors in self.errors.items()
        )


class ApproverGroupForm(forms.Form):
    name = forms.CharField(max_length=100, label="Group name")


class GroupMemberForm(forms.Form):
    user = forms.IntegerField(min_value=1, label="Approver")
    action = forms.ChoiceField(choices=[("add", "Add"), ("remove", "Remove")])


class ApprovalRouteForm(forms.Form):
    """A route as the console edits it; the groups are limited to the tenant's."""

    name = forms.CharField(max_length=100)
    condition = forms.CharField(
        max_length=4000,
        widget=forms.Textarea(attrs={"rows": 2, "class": "mono"}),
        help_text="The policy language over the call: skill.name, skill.namespace, skill.effect, args, end_user. "
        'For example skill.namespace == "billing" or args.amount_cents > 50000.',
    )
    group = forms.ModelChoiceField(queryset=None, label="Send to")
    fallback_group = forms.ModelChoiceField(queryset=None, required=False, label="Escalate overdue requests to")

    def __init__(self, *args, tenant, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        groups = tenant.approver_groups.order_by("name")
        for name in ("group", "fallback_group"):
            self.fields[name].queryset = groups
            self.fields[name].label_from_instance = lambda group: group.name


class RouteMoveForm(forms.Form):
    position = forms.IntegerField(min_value=0)


class EmailDecisionForm(forms.Form):
    """The confirmation page of an e-mailed link: approve as proposed, or decline with a reason."""

    decision = forms.ChoiceField(choices=[("approve", "Approve"), ("decline", "Decline")])
    reason = forms.CharField(required=False, max_length=2000, widget=forms.Textarea(attrs={"rows": 2}))
