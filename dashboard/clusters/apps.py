from django.apps import AppConfig


class ClustersConfig(AppConfig):
    name = "dashboard.clusters"
    label = "clusters"
    verbose_name = "Clusters"

    def ready(self) -> None:
        # A removed cluster leaves a tombstone the hosting fleets trust (dashboard/clusters/removal.py).
        from django.db.models.signals import post_delete, post_save

        from dashboard.clusters import removal
        from dashboard.clusters.models import Cluster

        post_delete.connect(removal.note_removed, sender=Cluster, dispatch_uid="kcp-cluster-removed")
        post_save.connect(removal.note_registered, sender=Cluster, dispatch_uid="kcp-cluster-registered")
