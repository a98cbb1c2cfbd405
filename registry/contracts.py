"""What the code behind an adapter says about itself, so that a manifest cannot say less.

A `python:<name>` adapter runs deployed code inside Airlock. Whoever writes that code declares, where the
function is registered (`runs.adapters.python.register`), its effect class, the approval it needs at
least, and which teams may name it. A manifest that claims a lower effect or a weaker approval than the
declaration, or that names a function its team may not use, is refused when it is stored and again when
it is published. An `mcp://<server>/<tool>` adapter names an approved server of the skill's own team or one
shared with that team (its headers are its owner's credentials; the rule is `McpServer.usable_by`, asked
through `hooks.mcp_server_refusal` and again at execution), and a tool imported from it: it is held to the
tool's own annotations, as recorded when the server was imported (`destructive_hint` and the rest,
`registry.mcp_import`). A tool never imported has no declaration and is refused.

A first version is also sent to review (`first_version_findings`) when it names a function that another
skill already runs, or declares more than the function does: nothing earlier was reviewed to compare with.
"""

from __future__ import annotations

from dataclasses import dataclass

from registry import hooks
from registry.models import EFFECT_RANK, Skill, SkillVersion
from registry.review import APPROVAL_RANK, Finding
from registry.validation import problem

ANY_TEAM = "*"


@dataclass(frozen=True)
class FunctionContract:
    """The declaration of one in-process function that `python:` adapters may name."""

    name: str
    effect: str
    approval: str = "not_required"
    teams: tuple[str, ...] = (ANY_TEAM,)
    sandbox_for: str = ""  # a sandbox: the function it stands in for when owners try a skill; never production
    confined: bool = False  # runs in the sandbox executor (`confined:<name>`), not in Airlock's process

    def __post_init__(self) -> None:
        if self.effect not in EFFECT_RANK or self.approval not in APPROVAL_RANK or not self.teams:
            raise ValueError(f"{self.name}: effect, approval or teams is not a valid declaration.")

    def allows_team(self, team_slug: str) -> bool:
        return ANY_TEAM in self.teams or team_slug in self.teams

    @property
    def approval_text(self) -> str:
        return {"not_required": "none", "required": "one person", "two_person": "two people"}[self.approval]

    @property
    def teams_text(self) -> str:
        return "any team" if ANY_TEAM in self.teams else ", ".join(self.teams)


_FUNCTIONS: dict[str, FunctionContract] = {}


def declare(contract: FunctionContract) -> None:
    _FUNCTIONS[contract.name] = contract


def declared_functions() -> list[FunctionContract]:
    return sorted(_FUNCTIONS.values(), key=lambda contract: contract.name)


def contract_for(adapter: str) -> FunctionContract | None:
    """The declaration the adapter's code makes: a registered function's, or an imported MCP tool's annotations."""
    if adapter.startswith(("python:", "confined:")):
        scheme, _, name = adapter.partition(":")
        contract = _FUNCTIONS.get(name)
        return contract if contract is not None and contract.confined == (scheme == "confined") else None
    if adapter.startswith("mcp://"):
        return _mcp_tool_contract(adapter)
    return None


def effect_of_annotations(annotations: dict) -> str:
    """The effect class an MCP tool's annotations declare (hints the server gives about itself)."""
    read_only = annotations.get("readOnlyHint") is True
    if read_only:
        return "read"
    if annotations.get("destructiveHint") is True:
        return "destructive"
    if annotations.get("openWorldHint") is True:
        return "external"
    return "write"


def _mcp_tool_contract(adapter: str) -> FunctionContract | None:
    """MCP annotations declare an effect, not an approval: the floor is the effect alone."""
    imported = (
        SkillVersion.objects.filter(manifest__execution__adapter=adapter)
        .exclude(imported_from={})
        .order_by("-created_at")
        .values_list("imported_from", flat=True)
        .first()
    )
    if imported is None:
        return None
    return imported_tool_contract(adapter, imported)


def imported_tool_contract(adapter: str, imported_from: dict) -> FunctionContract:
    """The declaration an MCP tool made of itself when it was imported (`SkillVersion.imported_from`)."""
    return FunctionContract(name=adapter, effect=effect_of_annotations(imported_from.get("annotations") or {}))


def mcp_server_problems(manifest: dict, team_slug: str | None) -> list[dict]:
    """Why the manifest's MCP targets (its adapter, and where it asks about earlier work) name a server
    that skills of `team_slug` may not call: unknown, not approved, or another team's and not shared."""
    execution = manifest.get("execution") or {}
    errors = []
    for key in ("adapter", "reconcile", "job_status", "sandbox"):
        target = str(execution.get(key) or "")
        if not target.startswith("mcp://"):
            continue
        server = target.removeprefix("mcp://").partition("/")[0]
        refusal = hooks.mcp_server_refusal(server=server, team_slug=team_slug or "")
        if refusal is not None:
            code, message = refusal
            errors.append(problem(f"$.execution.{key}", code, message))
    return errors


def contract_problems(manifest: dict, team_slug: str | None, *, imported_from: dict | None = None) -> list[dict]:
    """Why the manifest says less than its adapter's declaration (empty when it says as much or more).

    `imported_from` is the tool a version is being imported from (`registry.mcp_import`): its declaration
    before any version records it."""
    adapter = str((manifest.get("execution") or {}).get("adapter") or "")
    risk = manifest.get("risk") or {}
    effect, approval = risk.get("effect"), risk.get("approval", "not_required")
    server_errors = mcp_server_problems(manifest, team_slug)
    if server_errors:  # nothing more to say about a tool the skill may not call at all
        return server_errors
    if adapter.startswith("mcp://") and imported_from:
        contract = imported_tool_contract(adapter, imported_from)
    else:
        contract = contract_for(adapter)
    if contract is None:
        if adapter.startswith("confined:"):
            return [
                problem(
                    "$.execution.adapter",
                    "unknown_function",
                    f"No confined tool {adapter.removeprefix('confined:')} is registered in this deployment; a "
                    "confined: adapter names a tool registered with runs.adapters.confined.register_confined.",
                )
            ]
        if adapter.startswith("python:"):
            return [
                problem(
                    "$.execution.adapter",
                    "unknown_function",
                    f"No in-process function {adapter.removeprefix('python:')} is registered in this deployment; "
                    "a python: adapter names a function registered with its declaration (docs/registry.md).",
                )
            ]
        if adapter.startswith("mcp://"):
            server, _, tool = adapter.removeprefix("mcp://").partition("/")
            return [
                problem(
                    "$.execution.adapter",
                    "unknown_mcp_tool",
                    f"No tool {tool or '(none)'} was ever imported from the MCP server {server}, so nothing declares "
                    f"what it does; a member of the server's team imports its tools on the MCP servers page "
                    "before a skill may name one (docs/registry.md).",
                )
            ]
        return []
    errors = []
    if team_slug and adapter.startswith(("python:", "confined:")) and not contract.allows_team(team_slug):
        errors.append(
            problem(
                "$.execution.adapter",
                "function_not_for_team",
                f"{adapter} may be used by {contract.teams_text} only, as its declaration says; not by {team_slug}.",
            )
        )
    if effect in EFFECT_RANK and EFFECT_RANK[effect] < EFFECT_RANK[contract.effect]:
        errors.append(
            problem(
                "$.risk.effect",
                "effect_below_declaration",
                f"{adapter} declares the effect {contract.effect}; a skill that runs it cannot claim {effect}.",
            )
        )
    if approval in APPROVAL_RANK and APPROVAL_RANK[approval] < APPROVAL_RANK[contract.approval]:
        errors.append(
            problem(
                "$.risk.approval",
                "approval_below_declaration",
                f"{adapter} declares that it needs approval {contract.approval}; "
                f"a skill that runs it cannot ask for {approval}.",
            )
        )
    return errors


def first_version_findings(manifest: dict, skill: Skill) -> list[Finding]:
    """Why a skill's first version needs review because of the code it runs: shared with another skill, or
    declared differently from what that code declares."""
    adapter = str((manifest.get("execution") or {}).get("adapter") or "")
    if not adapter.startswith(("python:", "mcp://")):
        return []
    found = []
    others = sorted(
        set(
            SkillVersion.objects.filter(manifest__execution__adapter=adapter)
            .exclude(skill=skill)
            .values_list("skill__name", flat=True)
        )
    )
    if others:
        found.append(Finding("$.execution.adapter", f"{adapter} already runs {', '.join(others)}"))
    contract = contract_for(adapter)
    risk = manifest.get("risk") or {}
    if contract is not None:
        effect, approval = risk.get("effect"), risk.get("approval", "not_required")
        if effect != contract.effect:
            found.append(Finding("$.risk.effect", f"effect {effect} where {adapter} declares {contract.effect}"))
        if approval != contract.approval:
            found.append(
                Finding("$.risk.approval", f"approval {approval} where {adapter} declares {contract.approval}")
            )
    return found
