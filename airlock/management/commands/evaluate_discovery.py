"""`python manage.py evaluate_discovery`: the discovery harness's figures, stored per namespace for owners.

The harness (bench/discovery.py) runs in a throwaway database created for it, so the catalog, agents and
grants it loads never touch this database; only the figures per namespace are stored here afterwards.
"""

from django.core.management.base import BaseCommand

from bench.discovery import SCALE_VERSIONS, evaluate, evaluate_in_test_database
from registry.services import record_discovery_evaluation


class Command(BaseCommand):
    help = "Measure skill search on the labelled intents (recall@1/@5, MRR, zero results, p95, leaks)."

    def add_arguments(self, parser) -> None:
        parser.add_argument(
            "--scale-versions",
            type=int,
            default=SCALE_VERSIONS,
            help=f"Also measure latency at this many skill versions (default {SCALE_VERSIONS}; 0 skips it).",
        )
        parser.add_argument("--skills", type=int, default=1000, help="Skills in the generated catalog (default 1000).")
        parser.add_argument("--no-store", action="store_true", help="Print the figures without storing them.")
        parser.add_argument("--misses", action="store_true", help="Also list every intent the search got wrong.")
        parser.add_argument(
            "--flush-this-database",
            action="store_true",
            help="Run in the configured database instead of a throwaway one: it is flushed (tests, CI only).",
        )

    def handle(
        self,
        *args,
        scale_versions: int,
        skills: int,
        no_store: bool,
        misses: bool,
        flush_this_database: bool,
        **options,
    ) -> None:
        run = evaluate if flush_this_database else evaluate_in_test_database
        report = run(scale_versions=scale_versions, generated_skills=skills)
        for figure in report.figures():
            target = f"  ({figure.reference_name})" if figure.reference_name else ""
            self.stdout.write(f"{figure.name:<62} {figure.value:10.3f} {figure.unit}{target}")
        if misses:
            for miss in report.misses:
                self.stdout.write(
                    f"miss [{miss['catalog']}] {miss['query']!r}: want {miss['expected']}, got {miss['got']}"
                )
        if no_store:
            return
        stored = sum(
            record_discovery_evaluation(
                catalog=catalog,
                database=report.vendor,
                namespaces={namespace: scores.as_dict() for namespace, scores in rows.items()},
            )
            for catalog, rows in report.namespaces.items()
        )
        self.stdout.write(self.style.SUCCESS(f"Stored the figures of {stored} namespaces for the console."))
