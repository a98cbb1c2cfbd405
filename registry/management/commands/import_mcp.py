"""`python manage.py import_mcp <server URL or command> --team <slug>`: MCP tools as draft skills."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from console.models import Team
from registry.mcp_import import import_mcp_server


class Command(BaseCommand):
    help = "List an MCP server's tools and create draft skills in the mcp.<server> namespace."

    def add_arguments(self, parser) -> None:
        parser.add_argument("target", help="Streamable-HTTP URL (http://host:port/mcp) or a command (stdio).")
        parser.add_argument("--team", required=True, help="Slug of the owning team.")
        parser.add_argument("--server-name", default="", help="Namespace segment (default: the server's name).")
        parser.add_argument("--as", dest="username", default="", help="Record this user as the drafts' author.")
        parser.add_argument("--roles", default="*", help="Comma-separated allowed agent roles (default *).")
        parser.add_argument("--tenants", default="*", help="Comma-separated allowed tenant slugs (default *).")

    def handle(
        self, *args, target: str, team: str, server_name: str, username: str, roles: str, tenants: str, **options
    ) -> None:
        owner_team = Team.objects.filter(slug=team).first()
        if owner_team is None:
            raise CommandError(f"No team {team!r}.")
        author = None
        if username:
            author = get_user_model().objects.filter(username=username).first()
            if author is None:
                raise CommandError(f"No user {username!r}.")
        try:
            result = import_mcp_server(
                target=target,
                team=owner_team,
                author=author,
                server_name=server_name,
                roles=[r.strip() for r in roles.split(",") if r.strip()],
                tenants=[t.strip() for t in tenants.split(",") if t.strip()],
            )
        except (OSError, ValueError, TimeoutError) as exc:
            raise CommandError(f"Could not list the tools of {target}: {exc}") from exc
        for version in result.created:
            effect = version.manifest["risk"]["effect"]
            self.stdout.write(
                f"draft {version.skill.name}@{version.version} (effect {effect}: confirm before publishing)"
            )
        for name in result.skipped:
            self.stdout.write(f"skipped {name}: it already exists")
        for name, errors in result.failed.items():
            self.stdout.write(f"failed {name}: " + "; ".join(f"{e['path']}: {e['message']}" for e in errors))
        self.stdout.write(
            self.style.SUCCESS(
                f"{len(result.created)} draft(s) in mcp.{result.server}, {len(result.skipped)} skipped, "
                f"{len(result.failed)} failed."
            )
        )
