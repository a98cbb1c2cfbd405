"""Registry API: agent discovery (snapshots, search, tool definitions) and the owners' skill endpoints."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import status
from rest_framework.decorators import api_view, permission_classes
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response

from console.api_auth import IsAgent, IsHuman
from console.api_errors import error_body, error_responses
from lib import signing
from registry import services
from registry.api.serializers import (
    DeprecateSerializer,
    DiffSerializer,
    DraftVersionSerializer,
    ManifestCheckSerializer,
    ManifestSerializer,
    PublicKeySerializer,
    RetireSerializer,
    SearchResultSerializer,
    SignedSnapshotSerializer,
    SkillDetailSerializer,
    SkillListSerializer,
    SkillStatusSerializer,
    SkillVersionSerializer,
)
from registry.diff import diff_manifests
from registry.discovery import SearchFilters, agent_snapshot, search_skills, summary
from registry.models import DataClassification, Effect, Skill, SkillVersion
from registry.snapshots import latest_index
from registry.validation import lint_manifest, manifest_schema


def _invalid(errors: list[dict], warnings: list[dict] | None = None) -> Response:
    body = error_body("validation", "invalid_manifest", "The manifest is not valid; see errors.", errors=errors)
    if warnings is not None:
        body["warnings"] = warnings
    return Response(body, status=status.HTTP_400_BAD_REQUEST)


def _manifest_from(request: Request) -> dict | None:
    """The body's manifest, or None when the body is not `{"manifest": {...}}` (answered with _invalid)."""
    body = ManifestSerializer(data=request.data)
    return body.validated_data["manifest"] if body.is_valid() else None


def version_data(version: SkillVersion) -> dict:
    return {
        "id": version.pk,
        "name": version.skill.name,
        "version": version.version,
        "status": version.status,
        "effect": version.effect,
        "data_classification": version.data_classification,
        "review_reasons": version.review_reasons,
        "created_at": version.created_at,
        "published_at": version.published_at,
        "manifest": version.effective_manifest(),
    }


def skill_data(skill: Skill, versions: list[SkillVersion]) -> dict:
    return {
        "skill_id": skill.skill_id,
        "name": skill.name,
        "namespace": skill.namespace,
        "owner_team": skill.owner_team.slug,
        "versions": [{"version": v.version, "status": v.status, "effect": v.effect} for v in versions],
    }


# --- agents -----------------------------------------------------------------------------------


@extend_schema(responses={200: SignedSnapshotSerializer, 304: None}, tags=["registry (agents)"])
@api_view(["GET"])
@permission_classes([IsAgent])
def snapshot_latest(request: Request) -> Response:
    """The latest snapshot filtered to what this agent may discover, signed for it; ETag / If-None-Match."""
    view = agent_snapshot(request.auth, latest_index())
    if view.etag in [tag.strip() for tag in request.headers.get("If-None-Match", "").split(",")]:
        return Response(status=status.HTTP_304_NOT_MODIFIED, headers={"ETag": view.etag})
    return Response(
        {
            "snapshot": view.body,
            "sha256": view.sha256,
            "signature": view.signature,
            "key_id": view.key_id,
            "algorithm": "Ed25519",
            "canonicalization": "RFC 8785",
        },
        headers={"ETag": view.etag, "Cache-Control": "private, no-cache"},
    )


@extend_schema(responses={200: PublicKeySerializer}, tags=["registry (agents)"])
@api_view(["GET"])
@permission_classes([AllowAny])
def public_key(request: Request) -> Response:
    """The Ed25519 public key that verifies snapshot signatures."""
    return Response({"algorithm": "Ed25519", "key_id": signing.key_id(), "public_key_pem": signing.public_key_pem()})


def _classes(request: Request, name: str, allowed: list[str]) -> frozenset[str]:
    """A comma-separated filter (`effect=read,draft`); repeated parameters add up. Raises ValueError."""
    values = {value.strip() for raw in request.query_params.getlist(name) for value in raw.split(",") if value.strip()}
    unknown = sorted(values - set(allowed))
    if unknown:
        raise ValueError(f"{name} must be among {', '.join(allowed)} (comma-separated), not {', '.join(unknown)}.")
    return frozenset(values)


@extend_schema(
    parameters=[
        OpenApiParameter("q", str),
        OpenApiParameter("namespace", str),
        OpenApiParameter("limit", int),
        OpenApiParameter("effect", str, description="Effect classes, comma-separated: effect=read for reads only."),
        OpenApiParameter("data_class", str, description="Data classes, comma-separated: data_class=public,internal."),
    ],
    responses={200: SearchResultSerializer, **error_responses(400)},
    tags=["registry (agents)"],
)
@api_view(["GET"])
@permission_classes([IsAgent])
def skill_search(request: Request) -> Response:
    """Rank the skills this agent may use; permission filtering happens before ranking, filters only narrow."""
    try:
        limit = int(request.query_params.get("limit", 10))
    except ValueError:
        return Response(error_body("validation", "invalid_limit", "limit must be an integer."), status=400)
    query = request.query_params.get("q", "")[:300]
    namespace = request.query_params.get("namespace", "")  # a NUL in either is refused before (console.unsafe_input)
    try:
        filters = SearchFilters(
            effects=_classes(request, "effect", Effect.values),
            data_classes=_classes(request, "data_class", DataClassification.values),
        )
    except ValueError as exc:
        return Response(error_body("validation", "invalid_filter", str(exc)), status=400)
    index = latest_index()
    result = search_skills(
        agent=request.auth, index=index, query=query, namespace=namespace, limit=limit, filters=filters
    )
    return Response(
        {
            "query": query,
            "snapshot": index.number,
            "fallback": result.fallback,
            "results": [summary(entry) for entry in result.results],
        }
    )


# --- owners -----------------------------------------------------------------------------------


@extend_schema(
    responses={200: OpenApiResponse(OpenApiTypes.OBJECT, description="A JSON Schema (Draft 2020-12) document.")},
    tags=["registry"],
)
@api_view(["GET"])
@permission_classes([AllowAny])
def manifest_schema_view(request: Request) -> Response:
    """The skill manifest's JSON Schema (Draft 2020-12)."""
    return Response(manifest_schema())


@extend_schema(
    request=ManifestSerializer, responses={200: ManifestCheckSerializer, **error_responses(400)}, tags=["registry"]
)
@api_view(["POST"])
@permission_classes([IsHuman])
def validate(request: Request) -> Response:
    """Validate a manifest (as a new skill, or a new version when its name exists) without storing it."""
    manifest = _manifest_from(request)
    if manifest is None:
        return _invalid([{"path": "$", "code": "schema", "message": 'Send {"manifest": {...}}.'}])
    skill = Skill.objects.filter(name=manifest.get("name")).first()
    return Response(
        {"errors": services.check_manifest(manifest=manifest, skill=skill), "warnings": lint_manifest(manifest)}
    )


@extend_schema(methods=["GET"], responses={200: SkillListSerializer}, tags=["registry"])
@extend_schema(
    methods=["POST"],
    request=ManifestSerializer,
    responses={201: DraftVersionSerializer, **error_responses(400)},
    tags=["registry"],
)
@api_view(["GET", "POST"])
@permission_classes([IsHuman])
def skill_collection(request: Request) -> Response:
    """GET: the catalog. POST {manifest}: a new skill with its first draft version."""
    if request.method == "GET":
        skills = Skill.objects.select_related("owner_team").prefetch_related("versions").order_by("name")
        if namespace := request.query_params.get("namespace"):
            skills = skills.filter(namespace=namespace)
        return Response({"skills": [skill_data(s, list(s.versions.all())) for s in skills]})
    manifest = _manifest_from(request)
    if manifest is None:
        return _invalid([{"path": "$", "code": "schema", "message": 'Send {"manifest": {...}}.'}])
    try:
        version = services.create_draft_version(manifest=manifest, author=request.user)
    except services.ManifestInvalid as exc:
        return _invalid(exc.errors, lint_manifest(manifest))
    return Response({**version_data(version), "warnings": lint_manifest(manifest)}, status=status.HTTP_201_CREATED)


def _skill(name: str) -> Skill:
    return get_object_or_404(Skill.objects.select_related("owner_team"), name=name)


@extend_schema(
    operation_id="v1_skills_detail", responses={200: SkillDetailSerializer, **error_responses(404)}, tags=["registry"]
)
@api_view(["GET"])
@permission_classes([IsHuman])
def skill_detail(request: Request, name: str) -> Response:
    skill = _skill(name)
    versions = list(skill.versions.select_related("skill", "replacement"))
    return Response({**skill_data(skill, versions), "versions": [version_data(v) for v in versions]})


@extend_schema(
    request=ManifestSerializer,
    responses={201: DraftVersionSerializer, **error_responses(400, 403, 404)},
    tags=["registry"],
)
@api_view(["POST"])
@permission_classes([IsHuman])
def version_create(request: Request, name: str) -> Response:
    """A new draft version of an existing skill (re-sending a draft's version number replaces that draft)."""
    skill = _skill(name)
    if not skill.is_owned_by(request.user):  # the role before the body: a non-owner gets 403, never a 400
        raise PermissionDenied(f"Only the {skill.owner_team.slug} team or a platform admin may change {skill.name}.")
    manifest = _manifest_from(request)
    if manifest is None:
        return _invalid([{"path": "$", "code": "schema", "message": 'Send {"manifest": {...}}.'}])
    try:
        version = services.create_draft_version(manifest=manifest, author=request.user, skill=skill)
    except services.ManifestInvalid as exc:
        return _invalid(exc.errors, lint_manifest(manifest))
    return Response({**version_data(version), "warnings": lint_manifest(manifest)}, status=status.HTTP_201_CREATED)


def _version(name: str, version: str) -> SkillVersion:
    return get_object_or_404(
        SkillVersion.objects.select_related("skill__owner_team", "replacement"), skill__name=name, version=version
    )


@extend_schema(methods=["GET"], responses={200: SkillVersionSerializer, **error_responses(404)}, tags=["registry"])
@extend_schema(
    methods=["PUT"],
    request=ManifestSerializer,
    responses={200: SkillVersionSerializer, **error_responses(400, 403, 404, 409)},
    tags=["registry"],
)
@api_view(["GET", "PUT"])
@permission_classes([IsHuman])
def version_detail(request: Request, name: str, version: str) -> Response:
    """GET one version; PUT replaces a draft's manifest. Published versions are immutable (409)."""
    found = _version(name, version)
    if request.method == "GET":
        return Response(version_data(found))
    if not found.skill.is_owned_by(request.user):
        return Response(error_body("authorization", "not_owner", "Only the owning team may edit."), status=403)
    if found.status != "draft":
        return Response(
            error_body(
                "conflict", "immutable_version", f"{found} is {found.status} and immutable; create a new version."
            ),
            status=409,
        )
    manifest = _manifest_from(request)
    if manifest is None or manifest.get("version") != version:
        return _invalid(
            [
                {
                    "path": "$.version",
                    "code": "version_mismatch",
                    "message": f"PUT a manifest whose version is {version}.",
                }
            ]
        )
    try:
        updated = services.create_draft_version(manifest=manifest, author=request.user, skill=found.skill)
    except services.ManifestInvalid as exc:
        return _invalid(exc.errors, lint_manifest(manifest))
    return Response(version_data(updated))


def _lifecycle(call) -> Response:
    try:
        return call()
    except services.ManifestInvalid as exc:
        return _invalid(exc.errors)


@extend_schema(
    request=None, responses={200: SkillVersionSerializer, **error_responses(400, 403, 404, 409)}, tags=["registry"]
)
@api_view(["POST"])
@permission_classes([IsHuman])
def version_publish(request: Request, name: str, version: str) -> Response:
    """Publish a draft: active at once, or in_review when it raises the effect or widens permissions."""
    found = _version(name, version)
    return _lifecycle(lambda: Response(version_data(services.publish_version(version=found, user=request.user))))


@extend_schema(
    request=None, responses={200: SkillVersionSerializer, **error_responses(400, 403, 404, 409)}, tags=["registry"]
)
@api_view(["POST"])
@permission_classes([IsHuman])
def version_approve(request: Request, name: str, version: str) -> Response:
    """Second-person review: another owning-team member or a platform admin, never the author."""
    found = _version(name, version)
    return _lifecycle(lambda: Response(version_data(services.approve_version(version=found, user=request.user))))


def _replacement(named: str | None) -> Skill | None | Response:
    """The skill a body names as the replacement; a 400 Response when it names none that exists."""
    if not named:
        return None
    replacement = Skill.objects.filter(name=named).first()
    if replacement is None:
        return _invalid(
            [{"path": "$.replacement", "code": "unknown_replacement", "message": f"No skill {named!r} exists."}]
        )
    return replacement


@extend_schema(
    request=DeprecateSerializer,
    responses={200: SkillStatusSerializer, **error_responses(400, 403, 404)},
    tags=["registry"],
)
@api_view(["POST"])
@permission_classes([IsHuman])
def skill_deprecate(request: Request, name: str) -> Response:
    skill = _skill(name)
    body = DeprecateSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    replacement = _replacement(body.validated_data.get("replacement"))
    if isinstance(replacement, Response):
        return replacement
    return _lifecycle(
        lambda: Response(
            {
                "name": services.deprecate_skill(
                    skill=skill,
                    user=request.user,
                    replacement=replacement,
                    sunset_at=body.validated_data.get("sunset_at"),
                ).name,
                "status": "deprecated",
            }
        )
    )


@extend_schema(
    request=RetireSerializer,
    responses={200: SkillStatusSerializer, **error_responses(400, 403, 404)},
    tags=["registry"],
)
@api_view(["POST"])
@permission_classes([IsHuman])
def skill_retire(request: Request, name: str) -> Response:
    """Retire every published version. Runs that pinned it get a `retired` error naming the replacement."""
    skill = _skill(name)
    body = RetireSerializer(data=request.data)
    body.is_valid(raise_exception=True)
    replacement = _replacement(body.validated_data.get("replacement"))
    if isinstance(replacement, Response):
        return replacement
    return _lifecycle(
        lambda: Response(
            {
                "name": services.retire_skill(skill=skill, user=request.user, replacement=replacement).name,
                "status": "retired",
            }
        )
    )


@extend_schema(
    parameters=[OpenApiParameter("from", str), OpenApiParameter("to", str)],
    responses={200: DiffSerializer, **error_responses(404)},
    tags=["registry"],
)
@api_view(["GET"])
@permission_classes([IsHuman])
def skill_diff(request: Request, name: str) -> Response:
    """What changed between two versions; breaking input changes flagged."""
    old = _version(name, request.query_params.get("from", ""))
    new = _version(name, request.query_params.get("to", ""))
    return Response(
        {
            "from": old.version,
            "to": new.version,
            "changes": [c.as_dict() for c in diff_manifests(old.manifest, new.manifest)],
        }
    )
