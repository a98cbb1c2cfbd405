import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.utils import timezone
from django.views.decorators.http import require_GET, require_POST

from approvals import claims, presentation, queries, questions, queue, services
from approvals.forms import BulkDecisionForm, CancelForm, DecisionForm, InboxFilterForm
from approvals.models import ApprovalEvent, ApprovalRequest
from approvals.services import escalation_threshold
from console.models import Agent, Role
from console.tenancy import decision_reader_tenant_ids, get_visible_or_404, tenants_for
from lib import clock


def _get_approval_for_user(user, approval_id: int) -> ApprovalRequest:
    queryset = ApprovalRequest.objects.select_related("tenant", "agent", "call__run", "call__skill_version")
    return get_visible_or_404(queryset, user, pk=approval_id)


def _filters(request: HttpRequest) -> dict:
    form = InboxFilterForm(request.GET)
    return form.cleaned_data if form.is_valid() else {}


def _card_context(
    approval: ApprovalRequest,
    user,
    routed_ids: set[int] | None = None,
    history: queue.CardHistory | None = None,
    claim: claims.Claim | None = None,
) -> dict:
    action = presentation.proposed_action(approval, user, routed_ids)
    if history is None:
        history = queue.histories([approval])[approval.pk]
        claim = claims.current_claim(approval.pk)
    return {
        "approval": approval,
        "routed_to_me": approval.routed_to_user(user) if routed_ids is None else approval.pk in routed_ids,
        "action": action,
        "question": questions.question_in(action.arguments) if questions.is_question(approval) else None,
        "arguments_json": action.arguments_json,
        "overdue": approval.is_pending
        and (
            approval.escalated_at is not None or timezone.now() - approval.created_at >= escalation_threshold(approval)
        ),
        "own_run": approval.acts_for(user),
        "my_vote": any(v.user_id == user.pk for v in approval.votes.all()),
        "history": history,
        "claim": claim,
        "claimed_by_other": claim is not None and claim.user_id != user.pk,
    }


def _cards(user, pending: list[ApprovalRequest], routed: set[int]) -> list[dict]:
    """The inbox's cards: each one's history from one query, and its claim from one cache read."""
    histories = queue.histories(pending)
    held = claims.claims_on([a.pk for a in pending])
    return [_card_context(a, user, routed, histories[a.pk], held.get(a.pk)) for a in pending]


@login_required
@require_GET
def inbox(request: HttpRequest) -> HttpResponse:
    filters = _filters(request)
    pending = list(queries.pending_for(request.user, filters)[:200])
    everything = filters.get("group") == queries.GROUP_ALL  # an admin's oversight lists requests of other groups
    routed = queries.routed_among(request.user, pending) if everything else {approval.pk for approval in pending}
    cards = _cards(request.user, pending, routed)
    context = {
        "cards": cards,
        "groups": queue.grouped(cards),
        "filter_form": InboxFilterForm(request.GET),
        "query": request.GET.urlencode(),
    }
    if request.GET.get("partial") == "list":
        return render(request, "approvals/inbox.html#pending-list", context)
    approver_tenants = tenants_for(request.user, "approver")
    context.update(
        admin_tenants=tenants_for(request.user, Role.ADMIN).order_by("slug"),
        compact=queue.compact_inbox(request.user),
        claim_seconds=settings.AIRLOCK_APPROVAL_CLAIM_SECONDS,
        decision_tenants=tenants_for(request.user).filter(pk__in=decision_reader_tenant_ids(request.user)),
        recent=queries.recently_decided(request.user, everything=everything)[:15],
        scheduled=queries.scheduled_for(request.user)[:50],
        approver_tenants=approver_tenants,
        agents=Agent.objects.filter(tenant__in=approver_tenants).values_list("name", flat=True).distinct(),
    )
    return render(request, "approvals/inbox.html", context)


@login_required
@require_GET
def card(request: HttpRequest, approval_id: int) -> HttpResponse:
    """One pending card for the live inbox; empty once decided (htmx then removes the card)."""
    approval = queries.pending_for(request.user, _filters(request)).filter(pk=approval_id).first()
    if approval is None:
        get_visible_or_404(ApprovalRequest.objects, request.user, pk=approval_id)
        return HttpResponse("")
    return render(request, "approvals/inbox.html#card", _card_context(approval, request.user))


@login_required
@require_POST
def bulk_decide(request: HttpRequest) -> HttpResponse:
    """One decision and reason for a selection or a group of cards, each decided and audited on its own."""
    if not tenants_for(request.user, Role.APPROVER).exists():
        raise PermissionDenied("You are not an approver in any tenant.")
    form = BulkDecisionForm(request.POST)
    if not form.is_valid():
        outcomes, error = [], "Choose approve or decline and at least one request."
    else:
        data = form.cleaned_data
        outcomes = queue.decide_approvals(
            approval_ids=data["ids"], user=request.user, decision=data["decision"], reason=data["reason"]
        )
        error = ""
    if request.htmx:
        return render(request, "approvals/inbox.html#bulk-result", {"outcomes": outcomes, "error": error})
    if error:
        messages.error(request, error)
    for outcome in outcomes:
        level = messages.SUCCESS if outcome.ok else messages.WARNING
        messages.add_message(request, level, f"Request {outcome.approval_id}: {outcome.message}.")
    return redirect("approvals:inbox")


@login_required
@require_POST
def inbox_layout(request: HttpRequest) -> HttpResponse:
    """Full cards or the compact list, remembered for this person on every browser."""
    compact = queue.save_compact_inbox(user=request.user, compact=request.POST.get("compact") == "1")
    if request.htmx:
        return HttpResponse(status=204, headers={"X-Inbox-Compact": "1" if compact else "0"})
    return redirect("approvals:inbox")


@login_required
@require_GET
def pending_count(request: HttpRequest) -> HttpResponse:
    return HttpResponse(str(queries.pending_count(request.user)), content_type="text/plain")


@login_required
@require_GET
def detail(request: HttpRequest, approval_id: int) -> HttpResponse:
    approval = _get_approval_for_user(request.user, approval_id)
    return render(request, "approvals/detail.html", _detail_context(approval, request.user))


def _detail_context(approval: ApprovalRequest, user, error: str = "") -> dict:
    context = _card_context(approval, user)
    context.update(
        events=approval.events.select_related("actor"),
        votes=approval.votes.select_related("user"),
        can_decide=services.may_decide(user, approval),
        error=error,
        outcome_json=json.dumps(approval.outcome, indent=2, sort_keys=True) if approval.outcome else "",
        edited_json=json.dumps(approval.edited_arguments, indent=2, sort_keys=True)
        if approval.edited_arguments is not None
        else "",
        edited_fields=presentation.edited_fields(approval),
        runs_in=max(0, round((approval.scheduled_for - clock.now()).total_seconds())) if approval.is_scheduled else 0,
    )
    return context


@login_required
@require_POST
def preview_edit(request: HttpRequest, approval_id: int) -> HttpResponse:
    """The diff an edit would make, checked as the decision will be; nothing is recorded."""
    approval = _get_approval_for_user(request.user, approval_id)
    services.require_decider(request.user, approval)
    arguments = request.POST.get("arguments", "")
    context = {
        "approval": approval,
        "arguments": arguments,
        "changes": [],
        "error": "",
        "return_to": request.POST.get("return_to", ""),
    }
    try:
        context["changes"] = services.preview_edit(approval=approval, user=request.user, arguments=arguments)
    except services.InvalidDecision as exc:
        details = "; ".join(f"{f['path']}: {f['message']}" for f in exc.fields if f.get("path"))
        context["error"] = f"{exc} {details}".strip()
    return render(request, "approvals/inbox.html#edit-preview", context, status=400 if context["error"] else 200)


@login_required
@require_POST
def decide(request: HttpRequest, approval_id: int) -> HttpResponse:
    approval = _get_approval_for_user(request.user, approval_id)
    services.require_decider(request.user, approval)  # the role before the form: viewers get 403
    form = DecisionForm(request.POST)
    if not form.is_valid():
        return _decision_reply(request, approval, error="Choose approve or decline.", status=400)
    data = form.cleaned_data
    try:
        approval = services.decide_approval(
            approval=approval,
            user=request.user,
            decision=data["decision"],
            reason=data["reason"],
            arguments=data["arguments"] or None,
            answer=data["answer"],
        )
    except services.AlreadyDecided as exc:
        return _decision_reply(request, exc.request, error=f"This request was {exc}.", status=409)
    except services.InvalidDecision as exc:
        details = "; ".join(f"{f['path']}: {f['message']}" for f in exc.fields)
        return _decision_reply(request, approval, error=f"{exc} {details}".strip(), status=400)
    except PermissionDenied as exc:
        return _decision_reply(request, approval, error=str(exc), status=403)
    return _decision_reply(request, approval, error="", status=200)


@login_required
@require_POST
def ask_agent(request: HttpRequest, approval_id: int) -> HttpResponse:
    """An approver's question back to the agent's run, before deciding (services.ask_the_agent)."""
    approval = _get_approval_for_user(request.user, approval_id)
    services.require_decider(request.user, approval)  # the role before the form: viewers get 403
    try:
        services.ask_the_agent(approval=approval, user=request.user, question=request.POST.get("question", ""))
    except services.AlreadyDecided as exc:
        context = _detail_context(exc.request, request.user, f"This request was {exc}.")
        return render(request, "approvals/detail.html", context, status=409)
    except services.InvalidDecision as exc:
        return render(request, "approvals/detail.html", _detail_context(approval, request.user, str(exc)), status=400)
    messages.success(request, f"Request {approval.pk}: your question is on the agent's run; it stays pending.")
    return redirect("approvals:detail", approval.pk)


@login_required
@require_POST
def cancel(request: HttpRequest, approval_id: int) -> HttpResponse:
    """Take an approved call back during its undo window."""
    approval = _get_approval_for_user(request.user, approval_id)
    services.require_decider(request.user, approval)  # the role before the form: viewers get 403
    form = CancelForm(request.POST)
    if not form.is_valid():
        error = "Say why you cancel: the reason is shown to the agent and kept in the audit log."
        return render(request, "approvals/detail.html", _detail_context(approval, request.user, error), status=400)
    try:
        services.cancel_scheduled_approval(approval=approval, user=request.user, reason=form.cleaned_data["reason"])
    except services.TooLateToCancel as exc:
        approval.refresh_from_db()
        return render(request, "approvals/detail.html", _detail_context(approval, request.user, str(exc)), status=409)
    except services.InvalidDecision as exc:
        return render(request, "approvals/detail.html", _detail_context(approval, request.user, str(exc)), status=400)
    messages.success(request, f"Request {approval.pk}: cancelled; the call will not run.")
    return redirect("approvals:detail", approval.pk)


def _decision_reply(request: HttpRequest, approval: ApprovalRequest, *, error: str, status: int) -> HttpResponse:
    if request.htmx:
        context = {**_card_context(approval, request.user), "error": error}
        template = "approvals/inbox.html#card" if approval.is_pending else "approvals/inbox.html#decided"
        return render(request, template, context, status=status)
    if status == 403:
        raise PermissionDenied(error)
    if error:
        approval.refresh_from_db()
        return render(request, "approvals/detail.html", _detail_context(approval, request.user, error), status=status)
    if approval.is_scheduled:
        messages.success(
            request,
            f"Request {approval.pk}: approved. It runs at {approval.scheduled_for:%H:%M:%S} UTC, "
            "unless an approver cancels it before then.",
        )
    else:
        messages.success(request, f"Request {approval.pk}: {approval.status}.")
    if request.POST.get("return_to") == "detail":
        return redirect("approvals:detail", approval.pk)
    return redirect("approvals:inbox")


@login_required
@require_GET
def history(request: HttpRequest) -> HttpResponse:
    """The decisions this approver made, newest first."""
    events = (
        ApprovalEvent.objects.filter(actor=request.user, action__in=["approved", "declined", "vote", "cancelled"])
        .select_related("request", "tenant")
        .order_by("-created_at", "-id")
    )
    page = Paginator(events, 50).get_page(request.GET.get("page"))
    return render(request, "approvals/history.html", {"page": page})
