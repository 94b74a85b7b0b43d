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
        if taken.exists():
            raise forms.ValidationError(f"a cluster named {name!r} is registered already", code="duplicate")
        return name

    def validate_unique(self) -> None:
        # ``clean_name`` said it first and better; the database constraint still backs it.
        exclude = self._get_validation_exclusions()
        exclude.add("name")
        try:
            self.instance.validate_unique(exclude=exclude)
        except forms.ValidationError as exc:
            self._update_errors(exc)

    def _post_clean(self) -> None:
        # After the model's own validation (connect string syntax, mode): probe only what parses.
        super()._post_clean()
        data = self.cleaned_data
        connect, mode = data.get("zookeeper_connect"), data.get("mode")
        if self.errors or not connect or not mode:
            return
        unchanged = self.instance.pk is not None and not {"zookeeper_connect", "mode"} & set(self.changed_data)
        if unchanged:
            return
        try:
            self.probe = probe_cluster(str(connect), str(mode))
        except ProbeError as exc:
            self.add_error("zookeeper_connect", str(exc))
