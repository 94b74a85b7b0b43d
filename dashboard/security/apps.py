from django.apps import AppConfig


class SecurityConfig(AppConfig):
    name = "dashboard.security"
    label = "security"
    verbose_name = "Request limits and rejection audit"
