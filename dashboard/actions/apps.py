from django.apps import AppConfig


class ActionsConfig(AppConfig):
    name = "dashboard.actions"
    label = "actions"
    verbose_name = "Operator actions and audit"

    def ready(self) -> None:
        # The worker must import ``workers.actions`` to register its tasks (Celery's autodiscovery
        # only finds ``workers.tasks``). Named as a string: the web process never imports workers.
        from django.contrib.auth.signals import user_logged_in, user_login_failed

        from dashboard.actions import signals
        from dashboard.celery import app

        user_logged_in.connect(signals.logged_in, dispatch_uid="actions-audit-login")
        user_login_failed.connect(signals.login_failed, dispatch_uid="actions-audit-login-failed")

        imports = tuple(app.conf.imports or ())
        if "workers.actions" not in imports:
            app.conf.imports = (*imports, "workers.actions")
