from django.apps import AppConfig


class AuditConfig(AppConfig):
    name = "dashboard.audit"
    label = "audit"
    verbose_name = "Audit history"

    def ready(self) -> None:
        # Logins, failed logins and changes of clusters, users and roles become audit rows.
        from dashboard.audit import signals

        signals.connect()
