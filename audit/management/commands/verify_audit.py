"""Check every tenant's audit chain, the rows it covers and its signed checkpoints (docs/operations.md)."""

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from audit import chain


class Command(BaseCommand):
    help = "Check the audit hash chains and their signed checkpoints; name the first row edited or deleted."

    def add_arguments(self, parser):
        parser.add_argument(
            "--trusted-key",
            action="append",
            default=[],
            metavar="PEM_FILE",
            help="An earlier signing key's public key (PEM) whose checkpoints are still trusted; repeatable.",
        )
        parser.add_argument(
            "--link-unlinked",
            action="store_true",
            help="First link rows that are in no chain (rows written before the chain existed). Once, on upgrade.",
        )

    def handle(self, *args, trusted_key: list[str], link_unlinked: bool, **options):
        if link_unlinked:
            self.stdout.write(f"Linked {chain.link_unlinked_rows()} rows that were in no chain.")
        keys = [Path(path).read_text() for path in trusted_key]
        reports, unlinked = chain.verify_chains(trusted_keys=keys)
        failed = False
        for report in reports:
            name = f"tenant {report.tenant}" if report.tenant else "no tenant"
            counts = (
                f"{report.links} links, {report.rows} rows ({report.redacted} redacted), "
                f"{report.tombstones} tombstones, {report.checkpoints} signed checkpoints"
            )
            if report.problems:
                failed = True
                self.stdout.write(f"FAIL {name}: {report.problems[0]} ({counts})")
                for problem in report.problems[1:]:
                    self.stdout.write(f"     then: {problem}")
            else:
                self.stdout.write(f"OK   {name}: {counts}")
        for problem in unlinked:
            failed = True
            self.stdout.write(f"FAIL {problem}")
        if failed:
            raise CommandError("The audit record does not verify: see the lines marked FAIL.")
        self.stdout.write(self.style.SUCCESS(f"OK: {len(reports)} chains verify."))
