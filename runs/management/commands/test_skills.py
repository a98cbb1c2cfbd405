"""`python manage.py test_skills [--skill NAME] [--version V]`: run manifests' tests, for owners' CI.

Without --version, each skill's newest version that has tests (retired ones excepted). Exits non-zero when
any test fails or nothing matched; each run is recorded on its version as publishing's would be.
"""

from django.core.management.base import BaseCommand, CommandError

from registry.models import SkillVersion, VersionStatus
from runs import trials


class Command(BaseCommand):
    help = "Run skill versions' manifest tests against their sandboxes; exit 1 on any failure."

    def create_parser(self, prog_name: str, subcommand: str, **kwargs):
        # --version is this command's own option (a skill version), not Django's: the later definition wins.
        return super().create_parser(prog_name, subcommand, conflict_handler="resolve", **kwargs)

    def add_arguments(self, parser) -> None:
        parser.add_argument("--skill", default="", help="Only this skill (its full name).")
        parser.add_argument("--version", dest="version_label", default="", help="Only this version (needs --skill).")

    def handle(self, *args, skill: str, version_label: str, **options) -> None:
        if version_label and not skill:
            raise CommandError("--version needs --skill.")
        versions = self._versions(skill, version_label)
        if not versions:
            raise CommandError("No version with tests matched.")
        failed = 0
        for version in versions:
            tested = trials.run_skill_tests(version=version, trigger="command", user=None)
            self.stdout.write(f"{version.skill.name} {version.version} ({version.status})")
            for result in tested.results:
                mark = self.style.SUCCESS("  PASS") if result["passed"] else self.style.ERROR("  FAIL")
                self.stdout.write(f"{mark} {result['name']}")
                for failure in result["failures"]:
                    self.stdout.write(f"         {failure}")
            failed += len(tested.failures)
        total = sum(len(v.manifest.get("tests") or []) for v in versions)
        summary = f"{total - failed} of {total} tests passed in {len(versions)} version(s)."
        if failed:
            raise CommandError(summary)
        self.stdout.write(self.style.SUCCESS(summary))

    def _versions(self, skill: str, version_label: str) -> list[SkillVersion]:
        rows = (
            SkillVersion.objects.select_related("skill__owner_team")
            .exclude(status=VersionStatus.RETIRED)
            .filter(manifest__has_key="tests")
        )
        if skill:
            rows = rows.filter(skill__name=skill)
        if version_label:
            rows = rows.filter(version=version_label)
        newest: dict[int, SkillVersion] = {}
        for row in rows:
            if row.skill_id not in newest or row.semver > newest[row.skill_id].semver:
                newest[row.skill_id] = row
        return sorted(newest.values(), key=lambda v: v.skill.name)
