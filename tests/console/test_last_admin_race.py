"""Two admins remove each other at the same moment: one wins, the other is refused, the tenant keeps an admin.

Without the tenant row lock each would see the other still an admin and both would go (write skew)."""

import threading

import pytest
from django.core.exceptions import PermissionDenied
from django.db import connection

from console import services
from console.models import Membership, Role, Team
from tests.conftest import make_user


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_admins_removing_each_other_at_once_leave_one_admin(acme):
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL's row locks under concurrent transactions")
    admins = [make_user(f"racing-admin{n}", tenant=acme, roles=[Role.ADMIN]) for n in range(2)]
    start, outcomes = threading.Barrier(2), []

    def remove(n: int) -> None:
        start.wait(timeout=60)
        try:
            services.remove_member(tenant=acme, user=admins[1 - n], by=admins[n])
            outcomes.append("removed")
        except services.MembershipRefused:
            outcomes.append("refused")
        finally:
            connection.close()

    threads = [threading.Thread(target=remove, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(outcomes) == ["refused", "removed"]
    assert Membership.objects.filter(tenant=acme, role=Role.ADMIN).count() == 1


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_two_maintainers_removing_each_other_at_once_leave_one_maintainer():
    if connection.vendor != "postgresql":
        pytest.skip("needs PostgreSQL's row locks under concurrent transactions")
    team = Team.objects.create(slug="racers", name="Racers")
    maintainers = [make_user(f"racing-maintainer{n}") for n in range(2)]
    team.members.add(*maintainers)
    team.maintainers.add(*maintainers)
    start, outcomes = threading.Barrier(2), []

    def remove(n: int) -> None:
        start.wait(timeout=60)
        try:
            services.remove_teammate(team=team, user=maintainers[1 - n], by=maintainers[n])
            outcomes.append("removed")
        except (services.MembershipRefused, PermissionDenied) as exc:  # the loser is no longer a maintainer
            outcomes.append(type(exc).__name__)
        finally:
            connection.close()

    threads = [threading.Thread(target=remove, args=(n,)) for n in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert sorted(outcomes) == ["PermissionDenied", "removed"]
    assert team.maintainers.count() == 1 and team.members.count() == 1
