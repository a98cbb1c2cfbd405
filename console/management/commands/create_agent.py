from django.core.management.base import BaseCommand, CommandError

from console.models import Tenant
from console.services import create_agent


class Command(BaseCommand):
    help = "Create an agent in a tenant and print its API key once."

    def add_arguments(self, parser):
        parser.add_argument("--tenant", required=True, help="Tenant slug")
        parser.add_argument("--name", required=True)
        parser.add_argument("--role", required=True, help="Agent role, for example support")

    def handle(self, *args, tenant: str, name: str, role: str, **options):
        try:
            tenant_obj = Tenant.objects.get(slug=tenant)
        except Tenant.DoesNotExist:
            raise CommandError(f"No tenant with slug {tenant!r}.") from None
        if tenant_obj.agents.filter(name=name).exists():
            raise CommandError(f"Tenant {tenant} already has an agent called {name!r}.")
        agent, key = create_agent(tenant=tenant_obj, name=name, role=role)
        self.stdout.write(f"Created agent {agent} (role {role}). Its key, shown only now:")
        self.stdout.write(key)
