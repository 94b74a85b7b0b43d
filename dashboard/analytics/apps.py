from django.apps import AppConfig


class AnalyticsConfig(AppConfig):
    name = "dashboard.analytics"
    label = "analytics"
    verbose_name = "Analytics"
