from django.apps import AppConfig


class ClustersConfig(AppConfig):
    name = "dashboard.clusters"
    label = "clusters"
    verbose_name = "Clusters"
