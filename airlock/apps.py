from django.apps import AppConfig
from django.urls import register_converter

from lib.url_converters import IdConverter


class AirlockConfig(AppConfig):
    name = "airlock"
    verbose_name = "Airlock (project shell)"

    def ready(self) -> None:
        register_converter(IdConverter, "id")  # before any URLconf is imported: every app's ids use it
