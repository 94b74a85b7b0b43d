from django.apps import AppConfig


class ActionsConfig(AppConfig):
    name = "dashboard.actions"
    label = "actions"
    verbose_name = "Operator actions and audit"

    def ready(self) -> None:
        # The worker must import ``workers.actions``, ``workers.reassign`` and ``workers.retention`` to
        # register their tasks (Celery's autodiscovery only finds ``workers.tasks``). Named as strings:
        # the web process never imports workers.
        from django.contrib.auth.signals import user_logged_in, user_login_failed

        from dashboard.actions import signals
        from dashboard.celery import app

        user_logged_in.connect(signals.logged_in, dispatch_uid="actions-audit-login")
        user_login_failed.connect(signals.login_failed, dispatch_uid="actions-audit-login-failed")

        imports = tuple(app.conf.imports or ())
        wanted = ("workers.actions", "workers.reassign", "workers.retention", "workers.catchup_election")
        missing = tuple(m for m in wanted if m not in imports)
        if missing:
            app.conf.imports = (*imports, *missing)
