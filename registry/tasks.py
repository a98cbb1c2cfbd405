"""Celery tasks of the registry (found by autodiscovery): mail to skill owners, sent by a worker."""

from registry.notifications import email_owners

__all__ = ["email_owners"]
