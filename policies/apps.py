from django.apps import AppConfig


class PoliciesConfig(AppConfig):
    name = "policies"
