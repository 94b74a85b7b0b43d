from django.apps import AppConfig


class HealthConfig(AppConfig):
    name = "dashboard.health"
    label = "health"
    verbose_name = "Health"
