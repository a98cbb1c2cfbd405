"""The owners' try page of a version: the try panel, the result with its span and why panel, the skill
tests' latest results and the history of tries. Owners of the skill only (403 for anyone else)."""

from __future__ import annotations

import json

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_GET, require_POST

from console.tenancy import tenants_for
from registry import trials as registry_trials
from registry.models import SkillVersion
from registry.offering import named_roles
from runs import trials
from runs.forms import TryForm

TRIES_SHOWN = 20


def _initial_arguments(version: SkillVersion) -> dict:
    """The first example call the manifest's tests give with valid arguments, else an empty object."""
    for test in version.manifest.get("tests") or []:
        if test.get("valid", True):
            return test["arguments"]
    return {}


def _page_context(request: HttpRequest, version: SkillVersion, form: TryForm, latest=None) -> dict:
    try:
        target, refusal = registry_trials.try_target(version.manifest), ""
    except registry_trials.NotTriable as exc:
        target, refusal = None, str(exc)
    tries = version.tries.select_related("version__skill", "tried_by", "tenant")[:TRIES_SHOWN]
    roles = named_roles(version.manifest)
    return {
        "skill": version.skill,
        "version": version,
        "target": target,
        "refusal": refusal,
        "form": form,
        "tenants": tenants_for(request.user).order_by("name"),
        "roles": roles,
        "tests": version.manifest.get("tests") or [],
        "test_run": registry_trials.latest_test_run(version),
        "tries": [trials.try_data(row, request.user) for row in tries],
        "latest": latest,
    }


@login_required
@require_GET
def version_try_page(request: HttpRequest, name: str, version: str) -> HttpResponse:
    found = trials.version_for_owner(name=name, version=version, user=request.user)
    roles = named_roles(found.manifest)
    form = TryForm(initial={"arguments": _initial_arguments(found), "role": roles[0] if roles else ""})
    return render(request, "runs/try.html", _page_context(request, found, form))


@login_required
@require_POST
def version_try_run(request: HttpRequest, name: str, version: str) -> HttpResponse:
    found = trials.version_for_owner(name=name, version=version, user=request.user)
    form = TryForm(request.POST)
    latest, status = None, 200
    if form.is_valid():
        try:
            recorded = trials.try_version(version=found, user=request.user, via="console", **form.cleaned_data)
            latest = trials.try_data(recorded, request.user)
            latest["result_json"] = json.dumps(latest["result"], indent=2, ensure_ascii=False)
        except trials.NotTriable as exc:
            form.add_error(None, str(exc))
            status = 400
    else:
        status = 400
    context = {**_page_context(request, found, form, latest), "oob_history": bool(request.htmx)}
    template = "runs/try.html#panel" if request.htmx else "runs/try.html"
    return render(request, template, context, status=status)


@login_required
@require_POST
def version_tests_run(request: HttpRequest, name: str, version: str) -> HttpResponse:
    found = trials.version_for_owner(name=name, version=version, user=request.user)
    if not found.manifest.get("tests"):
        messages.error(request, f"{found} declares no tests.")
    else:
        tested = trials.run_skill_tests(version=found, trigger="console", user=request.user)
        failed = len(tested.failures)
        (messages.error if failed else messages.success)(
            request, f"{len(tested.results) - failed} of {len(tested.results)} tests passed."
        )
    return redirect("trials:try", name=name, version=version)
