"""The owners' evaluation pages: their teams' labelled sets next to the built-in figures, uploads, runs over
time, and recorded zero-result searches turned into labelled intents with one click."""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from registry import owner_evaluations as evaluations
from registry.forms import EvaluationUploadForm, SearchedIntentForm
from registry.models import DiscoveryEvaluation, EvaluationSet, Skill
from registry.namespaces import covers


def _get_set_for_user(user, set_id: int) -> EvaluationSet:
    return get_object_or_404(EvaluationSet.objects.visible_to(user).select_related("team"), pk=set_id)


def _namespace_skills(namespace: str) -> list[str]:
    return sorted(
        name
        for name, skill_namespace in Skill.objects.values_list("name", "namespace")
        if covers(namespace, skill_namespace)
    )


@login_required
@require_http_methods(["GET", "POST"])
def evaluation_list(request: HttpRequest) -> HttpResponse:
    if request.method == "POST":
        evaluations.require_team_member(request.user)
    namespaces = evaluations.namespaces_for(request.user)
    form = EvaluationUploadForm(request.POST or None, request.FILES or None, namespaces=namespaces)
    problems: list[dict] = []
    if request.method == "POST" and form.is_valid():
        data = form.cleaned_data
        try:
            evaluation_set = evaluations.upload_evaluation_set(
                namespace=data["namespace"], name=data["name"], raw=data["file"].read(), user=request.user
            )
        except evaluations.NotYours:
            raise Http404("No such namespace.") from None
        except evaluations.LabelledIntentsInvalid as exc:
            problems = exc.errors
        else:
            messages.success(request, f"Stored {evaluation_set.intents.count()} labelled intents.")
            return redirect("registry:evaluation", set_id=evaluation_set.pk)
    sets = EvaluationSet.objects.visible_to(request.user).select_related("team").prefetch_related("runs")
    return render(
        request,
        "registry/evaluations.html",
        {
            "form": form,
            "problems": problems,
            "namespaces": namespaces,
            "sets": [{"set": s, "latest": next(iter(s.runs.all()), None)} for s in sets],
            "builtin": DiscoveryEvaluation.objects.filter(namespace__in=namespaces),
        },
        status=400 if problems else 200,
    )


@login_required
@require_GET
def evaluation_detail(request: HttpRequest, set_id: int) -> HttpResponse:
    evaluation_set = _get_set_for_user(request.user, set_id)
    skills = _namespace_skills(evaluation_set.namespace)
    labelled = set(evaluation_set.intents.values_list("intent", flat=True))
    searches = [
        search
        for search in evaluations.zero_result_searches(request.user, evaluation_set.namespace)
        if search["query"] not in labelled
    ]
    for search in searches:
        search["form"] = SearchedIntentForm(initial={"search_id": search["search_id"]}, skills=skills)
    runs = list(evaluation_set.runs.all()[:30])
    return render(
        request,
        "registry/evaluation.html",
        {
            "set": evaluation_set,
            "runs": runs,
            "latest": next((run for run in runs if run.status == "done"), None),
            "intents": evaluation_set.intents.all()[:200],
            "intent_count": evaluation_set.intents.count(),
            "builtin": DiscoveryEvaluation.objects.filter(namespace=evaluation_set.namespace),
            "searches": searches,
        },
    )


@login_required
@require_POST
def evaluation_run(request: HttpRequest, set_id: int) -> HttpResponse:
    evaluation_set = _get_set_for_user(request.user, set_id)
    evaluations.request_owner_evaluation(evaluation_set=evaluation_set, user=request.user)
    messages.success(request, "Evaluation queued; the figures appear here when it finishes.")
    return redirect("registry:evaluation", set_id=evaluation_set.pk)


@login_required
@require_POST
def evaluation_add_search(request: HttpRequest, set_id: int) -> HttpResponse:
    evaluation_set = _get_set_for_user(request.user, set_id)
    form = SearchedIntentForm(request.POST, skills=_namespace_skills(evaluation_set.namespace))
    if not form.is_valid():
        messages.error(request, "Pick one of the namespace's skills.")
        return redirect("registry:evaluation", set_id=evaluation_set.pk)
    try:
        evaluations.add_searched_intent(
            evaluation_set=evaluation_set,
            search_id=form.cleaned_data["search_id"],
            expected=form.cleaned_data["expected"],
            user=request.user,
        )
    except evaluations.NotYours:
        raise Http404("No such search.") from None
    except evaluations.LabelledIntentsInvalid as exc:
        messages.error(request, exc.errors[0]["message"])
    else:
        messages.success(request, "Added the search as a labelled intent.")
    return redirect("registry:evaluation", set_id=evaluation_set.pk)
