from django.apps import AppConfig


class WorkersConfig(AppConfig):
    name = "workers"
    verbose_name = "Workers"

    def ready(self) -> None:
        # Register the role bootstep on the shared Celery app; it only acts inside a worker.
        from dashboard.celery import app
        from workers.bootsteps import HostedComponentsStep

        app.steps["worker"].add(HostedComponentsStep)
