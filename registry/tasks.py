"""Celery tasks of the registry (found by autodiscovery): mail to skill owners, sent by a worker, and owners'
own discovery evaluations."""

from registry.notifications import email_owners
from registry.owner_evaluations import run_owner_evaluation

__all__ = ["email_owners", "run_owner_evaluation"]
