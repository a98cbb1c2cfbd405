from django.core.management.base import BaseCommand
from django.db import transaction

from airlock.demo import seed_all
from console.demo import DEMO_PASSWORD, PEOPLE


class Command(BaseCommand):
    help = "Create (or top up) the demo tenants, people, teams, agents and each app's demo data."

    def handle(self, *args, **options):
        with transaction.atomic():
            context = seed_all()
        self.stdout.write(f"Demo logins (password for all: {DEMO_PASSWORD}):")
        for username, memberships, teams, superuser in PEOPLE:
            what = "; ".join(f"{slug}: {', '.join(roles)}" for slug, roles in memberships.items())
            extra = ", ".join(
                filter(
                    None, [f"owner in {', '.join(teams)}" if teams else "", "platform superuser" if superuser else ""]
                )
            )
            self.stdout.write(f"  {username:<8} {what}{' · ' + extra if extra else ''}")
        if context.new_keys:
            self.stdout.write("New agent keys (shown once; stored only as hashes):")
            for name, key in context.new_keys.items():
                self.stdout.write(f"  {name:<20} {key}")
        else:
            self.stdout.write(
                "Agents already exist; their keys were shown when first created "
                "(make a new one with manage.py create_agent)."
            )
        for line in context.lines:
            self.stdout.write(line)
