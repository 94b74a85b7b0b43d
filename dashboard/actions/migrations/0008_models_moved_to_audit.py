"""``Action``, ``StateChange`` and ``IngestCursor`` now belong to ``dashboard.audit`` (``audit.0001``).

State only: the tables stay as they are and keep their rows; ``audit`` names them with ``db_table``.
"""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [("actions", "0007_action_run_lease"), ("audit", "0001_initial")]

    state_operations = [
        migrations.RemoveField(model_name="action", name="user"),
        migrations.RemoveField(model_name="statechange", name="action"),
        migrations.DeleteModel(name="IngestCursor"),
        migrations.DeleteModel(name="Action"),
        migrations.DeleteModel(name="StateChange"),
    ]

    operations = [migrations.SeparateDatabaseAndState(state_operations=state_operations, database_operations=[])]
