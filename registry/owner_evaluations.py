"""Owners' own discovery evaluations: labelled intents a team uploads (JSONL) or picks from recorded
zero-result searches, run against the current catalog as a Celery task, kept as a history of figures.

The figures are the discovery harness's (lib/ranking_scores.py). The ranking is discovery's own
(`registry.ranking.RankIndex`) over every skill the latest snapshot lets anyone discover, so an owner's
skills compete with the whole catalog, the hardest case any tenant meets. A leak is what it is in the
harness: a result the searcher may not discover; here, a skill with no active version (the oracle reads
the versions' rows, not the snapshot the ranking used).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass

from celery import shared_task
from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.db.models import Count, Max, Q
from django.utils import timezone

from console.models import Team, Tenant
from console.tenancy import teams_for
from lib.ranking_scores import first_rank, recall_at, reciprocal_rank
from lib.sensitivity import mask_secrets
from registry.models import (
    DiscoveryQuery,
    EvaluationSet,
    EvaluationStatus,
    IntentSource,
    LabelledIntent,
    NamespaceClaim,
    OwnerEvaluation,
    Skill,
    SkillVersion,
    VersionStatus,
)
from registry.namespaces import covers, owning_claim
from registry.offering import offers_tenant
from registry.ranking import RankIndex, terms
from registry.snapshots import latest_index

logger = logging.getLogger(__name__)
MAX_UPLOAD_BYTES = 1_000_000  # 2,000 intents of 300 characters with their labels fit several times over
MAX_INTENTS = 2_000
MAX_EXPECTED = 5
INTENT_CHARS = 300
RESULTS = 10
MISSES_KEPT = 25


class LabelledIntentsInvalid(Exception):
    """The upload is refused as a whole; `errors` lists each problem with its line (0: the file itself)."""

    def __init__(self, errors: list[dict]) -> None:
        super().__init__("; ".join(e["message"] for e in errors))
        self.errors = errors


class NotYours(Exception):
    """The namespace, set or search is not the user's team's to use: views answer 404, never say whose it is."""


def _problem(line: int, code: str, message: str) -> dict:
    return {"line": line, "code": code, "message": f"line {line}: {message}" if line else message}


# --- who owns what --------------------------------------------------------------------------------


def owner_team_of(namespace: str) -> Team | None:
    """The team whose namespace this is: its approved claim, else the team owning its skills."""
    claim = owning_claim(namespace)
    if claim is not None:
        return claim.team
    skill = Skill.objects.select_related("owner_team").filter(namespace=namespace).first()
    return skill.owner_team if skill is not None else None


def namespaces_for(user) -> list[str]:
    """The namespaces the user's teams own (claimed, or holding their skills): where they may evaluate."""
    teams = teams_for(user)
    claimed = NamespaceClaim.objects.filter(team__in=teams, status="approved").values_list("namespace", flat=True)
    with_skills = Skill.objects.filter(owner_team__in=teams).values_list("namespace", flat=True)
    return sorted(
        namespace
        for namespace in set(claimed) | set(with_skills)
        if (team := owner_team_of(namespace)) is not None and teams.filter(pk=team.pk).exists()
    )


def require_team_member(user) -> None:
    """Only a member of a skill-owning team (or a platform admin) uploads labelled intents: checked before the
    body is read, so a member of no team gets 403 whatever they send."""
    if not teams_for(user).exists():
        raise PermissionDenied("Only members of a team that owns skills (or a platform admin) may upload intents.")


def _team_for_upload(namespace: str, user) -> Team:
    team = owner_team_of(namespace)
    if team is None or not teams_for(user).filter(pk=team.pk).exists():
        raise NotYours(f"No namespace {namespace} of yours.")
    return team


def _in_namespace(skill: Skill, namespace: str) -> bool:
    return covers(namespace, skill.namespace)


# --- parsing an upload ----------------------------------------------------------------------------


@dataclass(frozen=True)
class ParsedIntent:
    line: int
    intent: str
    expected: list[str]


def _expected_problems(line: int, expected: list[str], *, namespace: str, team: Team) -> list[dict]:
    skills = {skill.name: skill for skill in Skill.objects.filter(name__in=expected)}
    problems = []
    for name in expected:
        skill = skills.get(name)
        if skill is None:
            problems.append(_problem(line, "unknown_skill", f"no skill is named {name!r}."))
        elif skill.owner_team_id != team.pk:
            problems.append(
                _problem(line, "another_teams_skill", f"{name} belongs to another team; label your own skills only.")
            )
        elif not _in_namespace(skill, namespace):
            problems.append(_problem(line, "outside_namespace", f"{name} is not in the namespace {namespace}."))
    return problems


def _parse_line(line: int, text: str) -> tuple[ParsedIntent | None, list[dict]]:
    try:
        row = json.loads(text)
    except ValueError as exc:
        return None, [_problem(line, "not_json", f"not valid JSON ({exc.msg} at column {exc.colno}).")]
    if not isinstance(row, dict):
        shape = 'each line must be an object {"intent": ..., "expected": [...]}.'
        return None, [_problem(line, "not_an_object", shape)]
    unknown = sorted(set(row) - {"intent", "expected"})
    if unknown:
        return None, [_problem(line, "unknown_key", f"unknown key {unknown[0]!r}; only intent and expected.")]
    intent, expected = row.get("intent"), row.get("expected")
    if not isinstance(intent, str) or not intent.strip() or len(intent) > INTENT_CHARS:
        return None, [_problem(line, "bad_intent", f"intent must be text of 1 to {INTENT_CHARS} characters.")]
    if (
        not isinstance(expected, list)
        or not 1 <= len(expected) <= MAX_EXPECTED
        or not all(isinstance(name, str) and name for name in expected)
    ):
        return None, [
            _problem(line, "bad_expected", f"expected must list 1 to {MAX_EXPECTED} skill names, best first.")
        ]
    return ParsedIntent(line, " ".join(intent.split()), list(dict.fromkeys(expected))), []


def parse_labelled_intents(raw: bytes, *, namespace: str, team: Team) -> list[ParsedIntent]:
    """Every intent of a JSONL upload, or LabelledIntentsInvalid naming each bad line (nothing is kept)."""
    if len(raw) > MAX_UPLOAD_BYTES:
        raise LabelledIntentsInvalid(
            [_problem(0, "file_too_large", f"The file has {len(raw):,} bytes; the limit is {MAX_UPLOAD_BYTES:,}.")]
        )
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LabelledIntentsInvalid([_problem(0, "not_utf8", f"The file is not UTF-8 (byte {exc.start}).")]) from None
    parsed, problems = [], []
    for line, content in enumerate(text.splitlines(), 1):
        if not content.strip():
            continue
        intent, found = _parse_line(line, content)
        if intent is not None:
            found = _expected_problems(line, intent.expected, namespace=namespace, team=team)
            parsed.append(intent)
        problems += found
        if len(problems) >= 20:
            problems.append(_problem(0, "too_many_problems", "Stopped after 20 problems; fix these first."))
            break
    if len(parsed) > MAX_INTENTS:
        problems.append(_problem(0, "too_many_intents", f"{len(parsed):,} intents; at most {MAX_INTENTS:,}."))
    if not parsed and not problems:
        problems.append(_problem(0, "empty_file", "The file holds no intent."))
    if problems:
        raise LabelledIntentsInvalid(problems)
    return parsed


# --- writes ---------------------------------------------------------------------------------------


@transaction.atomic
def upload_evaluation_set(*, namespace: str, name: str, raw: bytes, user) -> EvaluationSet:
    """Store an uploaded JSONL as the set `name` of `namespace` (replacing that set's intents; its history of
    runs stays). Only the namespace's owning team may; a refused file stores nothing."""
    team = _team_for_upload(namespace, user)
    parsed = parse_labelled_intents(raw, namespace=namespace, team=team)
    now = timezone.now()
    evaluation_set, created = EvaluationSet.objects.get_or_create(
        namespace=namespace, name=name, defaults={"team": team, "created_by": user, "created_at": now}
    )
    if not created and evaluation_set.team_id != team.pk:
        raise NotYours(f"No set {name} of yours.")
    evaluation_set.intents.filter(source=IntentSource.UPLOAD).delete()
    LabelledIntent.objects.bulk_create(
        LabelledIntent(evaluation_set=evaluation_set, intent=p.intent, expected=p.expected, line=p.line) for p in parsed
    )
    EvaluationSet.objects.filter(pk=evaluation_set.pk).update(updated_at=now)
    return evaluation_set


@transaction.atomic
def add_searched_intent(*, evaluation_set: EvaluationSet, search_id: int, expected: str, user) -> LabelledIntent:
    """Label a recorded zero-result search the owner may see with the skill they pick."""
    if not EvaluationSet.objects.visible_to(user).filter(pk=evaluation_set.pk).exists():
        raise NotYours("No such set.")
    search = _zero_result_rows(user, evaluation_set.namespace).filter(pk=search_id).first()
    if search is None:
        raise NotYours("No such search.")
    problems = _expected_problems(0, [expected], namespace=evaluation_set.namespace, team=evaluation_set.team)
    if problems:
        raise LabelledIntentsInvalid(problems)
    intent = LabelledIntent.objects.create(
        evaluation_set=evaluation_set, intent=search.query, expected=[expected], source=IntentSource.SEARCH
    )
    EvaluationSet.objects.filter(pk=evaluation_set.pk).update(updated_at=timezone.now())
    return intent


def request_owner_evaluation(*, evaluation_set: EvaluationSet, user) -> OwnerEvaluation:
    """Queue a run of the set (a Celery task, after commit; eager in the embedded mode)."""
    if not EvaluationSet.objects.visible_to(user).filter(pk=evaluation_set.pk).exists():
        raise NotYours("No such set.")
    run = OwnerEvaluation.objects.create(evaluation_set=evaluation_set, requested_by=user)
    run_owner_evaluation.delay_on_commit(run.pk)
    return run


@shared_task(name="registry.tasks.run_owner_evaluation", ignore_result=True)
def run_owner_evaluation(evaluation_id: int) -> bool:
    """Claim a queued run (a second delivery finds it claimed and does nothing), measure, store the figures."""
    claimed = OwnerEvaluation.objects.filter(pk=evaluation_id, status=EvaluationStatus.QUEUED).update(
        status=EvaluationStatus.RUNNING
    )
    if not claimed:
        return False
    run = OwnerEvaluation.objects.select_related("evaluation_set").get(pk=evaluation_id)
    try:
        figures = evaluate_intents(list(run.evaluation_set.intents.all()))
    except Exception as exc:  # the run's row says so; the owner sees it on the page
        logger.exception("Owner evaluation %s failed", evaluation_id)
        OwnerEvaluation.objects.filter(pk=run.pk).update(
            status=EvaluationStatus.FAILED, error=f"{type(exc).__name__}: {exc}"[:500], finished_at=timezone.now()
        )
        return False
    OwnerEvaluation.objects.filter(pk=run.pk, status=EvaluationStatus.RUNNING).update(
        status=EvaluationStatus.DONE, finished_at=timezone.now(), **figures
    )
    return True


# --- measuring ------------------------------------------------------------------------------------


def evaluate_intents(intents: list[LabelledIntent]) -> dict:
    """recall@1, recall@5, MRR and leaks of the intents, ranked over the latest snapshot's discoverable skills."""
    index = latest_index()
    ranker = RankIndex.build(index.current_entries())
    discoverable = set(
        SkillVersion.objects.filter(status=VersionStatus.ACTIVE).values_list("skill__name", flat=True).distinct()
    )
    recall_1 = recall_5 = mrr = 0.0
    leaks, misses = 0, []
    for intent in intents:
        results = [entry["name"] for entry in ranker.rank(intent.intent, limit=RESULTS)]
        recall_1 += recall_at(results, intent.expected, 1)
        recall_5 += recall_at(results, intent.expected, 5)
        mrr += reciprocal_rank(results, intent.expected)
        leaks += sum(1 for name in results if name not in discoverable)
        if first_rank(results, intent.expected) != 1 and len(misses) < MISSES_KEPT:
            rank = first_rank(results, intent.expected)
            misses.append({"intent": intent.intent, "expected": intent.expected, "got": results[:5], "rank": rank})
    count = len(intents)
    return {
        "snapshot_number": index.number,
        "intents": count,
        "recall_at_1": recall_1 / count if count else 0.0,
        "recall_at_5": recall_5 / count if count else 0.0,
        "mrr": mrr / count if count else 0.0,
        "leaks": leaks,
        "misses": misses,
    }


# --- zero-result searches an owner may label ------------------------------------------------------


def _offering_tenants(namespace: str) -> list[int]:
    """The tenants an active skill of the namespace is offered to."""
    manifests = list(
        SkillVersion.objects.filter(status=VersionStatus.ACTIVE)
        .filter(Q(skill__namespace=namespace) | Q(skill__namespace__startswith=namespace + "."))
        .values_list("manifest", flat=True)
    )
    return [
        pk
        for pk, slug in Tenant.objects.values_list("pk", "slug")
        if any(offers_tenant(manifest, slug) for manifest in manifests)
    ]


def _zero_result_rows(user, namespace: str):
    """The one rule for which recorded searches an owner may label: zero-result searches of tenants the user
    belongs to (`DiscoveryQuery.objects.visible_to`, as everywhere), among those the namespace is offered to,
    made in the namespace or in none."""
    return (
        DiscoveryQuery.objects.visible_to(user)
        .filter(result_count=0, agent__tenant__in=_offering_tenants(namespace))
        .filter(Q(namespace="") | Q(namespace=namespace) | Q(namespace__startswith=namespace + "."))
    )


def zero_result_searches(user, namespace: str, limit: int = 15) -> list[dict]:
    """The searches as an owner sees them: the words (secrets masked again), how often and when last; never the
    tenant or the agent. A search made with no namespace shows only when it shares a word with the namespace's
    skills ("water the plants" is nobody's refund intent)."""
    words = {
        word
        for name, description in Skill.objects.filter(
            Q(namespace=namespace) | Q(namespace__startswith=namespace + ".")
        ).values_list("name", "versions__description")
        for word in terms(f"{name.replace('.', ' ').replace('_', ' ')} {description or ''}")
    }
    rows = (
        _zero_result_rows(user, namespace)
        .values("query", "namespace")
        .annotate(times=Count("id"), search_id=Max("id"), last_seen=Max("created_at"))
        .order_by("-times", "-last_seen")[: limit * 4]
    )
    shown = [
        {"query": mask_secrets(row["query"]), "times": row["times"], "search_id": row["search_id"]}
        for row in rows
        if row["namespace"] or words & set(terms(row["query"]))
    ]
    return shown[:limit]
