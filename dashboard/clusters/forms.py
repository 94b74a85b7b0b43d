"""The cluster registration form shared by the admin pages, the JSON API and Django admin.

Why one form: every way of registering a cluster must refuse the same bad input with the same
message and register nothing: a connect string that does not parse (model validator), a name
already used, a ZooKeeper that cannot be reached, a chroot without Kafka's layout (``probe``).
The name is fixed once registered: it keys the mirror's Redis snapshot, the controller's stream and
the audit history, so a rename would orphan all three (remove and register instead).
"""

from __future__ import annotations

from typing import Any

from django import forms

from dashboard.clusters.connect import parse_connect_string
from dashboard.clusters.models import Cluster
from dashboard.clusters.probe import ProbeError, ProbeResult, probe_cluster


class ClusterRegistrationForm(forms.ModelForm):  # type: ignore[type-arg]
    class Meta:
        model = Cluster
        fields = ("name", "zookeeper_connect", "mode", "description")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.probe: ProbeResult | None = None
        if self.instance.pk is not None and "name" in self.fields:
            self.fields["name"].disabled = True
            self.fields["name"].help_text = "Fixed once registered (it keys the mirror, the stream and the history)."

    def clean_name(self) -> str:
        name = str(self.cleaned_data["name"])
        taken = Cluster.objects.filter(name=name).exclude(pk=self.instance.pk)
        if taken.exists():  # said before the model's own unique check, which then skips the field
            raise forms.ValidationError(f"a cluster named {name!r} is registered already", code="duplicate")
        return name

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        connect, mode = data.get("zookeeper_connect"), data.get("mode")
        if self.errors or not connect or not mode:
            return data
        try:
            parse_connect_string(str(connect))
        except ValueError:
            return data  # the model's validator says what is wrong with it
        unchanged = self.instance.pk is not None and not {"zookeeper_connect", "mode"} & set(self.changed_data)
        if unchanged:
            return data
        try:
            self.probe = probe_cluster(str(connect), str(mode))
        except ProbeError as exc:
            self.add_error("zookeeper_connect", str(exc))
        return data
