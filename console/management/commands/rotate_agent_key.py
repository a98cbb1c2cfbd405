from datetime import timedelta

from django.core.management.base import BaseCommand, CommandError

from console.models import DEFAULT_KEY_GRACE, MAX_KEY_GRACE, Agent
from console.services import KeyRotationRefused, cut_off_old_key, rotate_agent_key

MAX_GRACE_HOURS = int(MAX_KEY_GRACE.total_seconds() // 3600)


class Command(BaseCommand):
    help = (
        "Give an agent a new API key and print it once; the old key keeps working for --grace-hours "
        "(default 24). With --cut-off, end the old key's grace period now instead."
    )

    def add_arguments(self, parser):
        parser.add_argument("tenant", help="Tenant slug")
        parser.add_argument("agent", help="Agent name")
        parser.add_argument(
            "--grace-hours",
            type=int,
            default=int(DEFAULT_KEY_GRACE.total_seconds() // 3600),
            help=f"How long the old key keeps working: 0 (stops now) to {MAX_GRACE_HOURS}.",
        )
        parser.add_argument("--cut-off", action="store_true", help="Stop the old key now; issue no new key.")

    def handle(self, *args, tenant: str, agent: str, grace_hours: int, cut_off: bool, **options):
        found = Agent.objects.select_related("tenant").filter(tenant__slug=tenant, name=agent).first()
        if found is None:
            raise CommandError(f"Tenant {tenant!r} has no agent called {agent!r}.")
        if not 0 <= grace_hours <= MAX_GRACE_HOURS:
            raise CommandError(f"--grace-hours is between 0 and {MAX_GRACE_HOURS}.")
        try:
            if cut_off:
                cut_off_old_key(agent=found, by=None)
                self.stdout.write(f"The old key of {found} is cut off; only ak_{found.key_lookup}_… works.")
                return
            found, key = rotate_agent_key(agent=found, by=None, grace=timedelta(hours=grace_hours))
        except KeyRotationRefused as exc:
            raise CommandError(str(exc)) from None
        until = found.previous_key_expires_at
        self.stdout.write(
            f"Rotated the key of {found}. The old key ak_{found.previous_key_lookup}_… "
            + (f"works until {until:%Y-%m-%d %H:%M} UTC." if grace_hours else "stopped working now.")
        )
        self.stdout.write("The new key, shown only now:")
        self.stdout.write(key)
