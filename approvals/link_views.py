"""Console pages behind links sent outside the console: an e-mail's decision link, and the link that
proposes tying a Slack user to the signed-in approver (the Slack user confirms it from Slack). A GET
shows what would happen; only a POST acts."""

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_http_methods, require_POST

from approvals import decision_links, presentation, services, slack, slack_linking
from approvals.forms import EmailDecisionForm
from approvals.models import ApprovalRequest
from console.models import Role
from console.tenancy import get_visible_or_404, require_role, tenant_for_user_or_404, tenants_for


def _email_page(request: HttpRequest, notice, form, *, error: str = "", status: int = 200) -> HttpResponse:
    queryset = ApprovalRequest.objects.select_related("tenant", "agent", "call__run", "call__skill_version")
    approval = get_visible_or_404(queryset, request.user, pk=notice.approval_id)
    context = {
        "notice": notice,
        "approval": approval,
        "action": presentation.proposed_action(approval, request.user),
        "form": form,
        "error": error,
    }
    return render(request, "approvals/email_decision.html", context, status=status)


@login_required
@require_http_methods(["GET", "POST"])
def email_decision(request: HttpRequest, link: str) -> HttpResponse:
    """The e-mailed link: the request and Approve / Decline for its recipient; the POST decides."""
    try:
        notice = decision_links.notice_of_link(link)
    except decision_links.LinkRefused as exc:
        return render(request, "approvals/email_decision.html", {"refused": str(exc)}, status=400)
    decision_links.check_recipient(notice, request.user)
    form = EmailDecisionForm(request.POST or None)
    if request.method == "GET":
        return _email_page(request, notice, form)
    if not form.is_valid():
        return _email_page(request, notice, form, error="Choose approve or decline.", status=400)
    try:
        approval = decision_links.decide_by_link(notice=notice, user=request.user, **form.cleaned_data)
    except services.AlreadyDecided as exc:
        return _email_page(request, notice, form, error=f"This request was {exc}.", status=409)
    except (services.InvalidDecision, decision_links.LinkRefused) as exc:
        return _email_page(request, notice, form, error=str(exc), status=400)
    except PermissionDenied as exc:
        return _email_page(request, notice, form, error=str(exc), status=403)
    messages.success(request, f"Request {approval.pk}: {approval.status}.")
    return redirect("approvals:detail", approval.pk)


@never_cache  # the POST's page carries the one-time code
@login_required
@require_http_methods(["GET", "POST"])
def slack_link(request: HttpRequest, slack_token: str) -> HttpResponse:
    """Propose that the Slack user who pressed a button is the signed-in approver; the POST's page shows the
    one-time code that Slack user types back in Slack, where the link is made."""
    try:
        identity = slack.read_link_token(slack_token)
    except slack.SlackRefused as exc:
        return render(request, "approvals/slack_link.html", {"refused": str(exc)}, status=400)
    tenant = get_object_or_404(tenants_for(request.user), pk=identity["t"])
    require_role(request.user, tenant, Role.APPROVER)
    context = {"tenant": tenant, "identity": identity, "error": "", "code": ""}
    if request.method == "POST":
        try:
            _, context["code"] = slack_linking.propose_slack_link(tenant=tenant, user=request.user, identity=identity)
        except slack_linking.LinkRefused as exc:
            return render(request, "approvals/slack_link.html", {**context, "error": str(exc)}, status=400)
        context["minutes"] = int(slack_linking.PROPOSAL_MAX_AGE.total_seconds() // 60)
    return render(request, "approvals/slack_link.html", context)


@login_required
@require_POST
def slack_unlink(request: HttpRequest, tenant_slug: str) -> HttpResponse:
    tenant = tenant_for_user_or_404(request.user, tenant_slug, role=Role.APPROVER)
    if slack_linking.unlink_slack_user(tenant=tenant, user=request.user):
        messages.success(request, f"Your Slack account is no longer linked in {tenant.name}.")
    return redirect("approvals:notification_preferences")
