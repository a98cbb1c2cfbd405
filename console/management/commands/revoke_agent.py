from django.core.management.base import BaseCommand, CommandError

from console.models import Agent
from console.services import revoke_agent


class Command(BaseCommand):
    help = "Revoke an agent's API key: --tenant and --name, or the key's lookup part with --lookup."

    def add_arguments(self, parser):
        parser.add_argument("--tenant")
        parser.add_argument("--name")
        parser.add_argument("--lookup", help="The middle part of ak_<lookup>_<secret>")

    def handle(self, *args, tenant=None, name=None, lookup=None, **options):
        if lookup:
            agents = Agent.objects.filter(key_lookup=lookup)
        elif tenant and name:
            agents = Agent.objects.filter(tenant__slug=tenant, name=name)
        else:
            raise CommandError("Give --tenant and --name, or --lookup.")
        agent = agents.select_related("tenant").first()
        if agent is None:
            raise CommandError("No such agent.")
        if agent.is_revoked:
            self.stdout.write(f"Agent {agent} was already revoked at {agent.revoked_at:%Y-%m-%d %H:%M}.")
            return
        revoke_agent(agent=agent)
        self.stdout.write(f"Revoked agent {agent}.")
