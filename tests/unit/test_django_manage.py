"""scripts/support/django_manage: a command's stdout, or an error carrying what it printed (and a bound on
how long it may take)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scripts.support.django_manage import ManageFailed, manage


def _env(tmp_path: Path) -> dict[str, str]:
    return {
        **{k: v for k, v in os.environ.items() if not k.startswith("DJANGO_")},
        "DJANGO_SETTINGS_MODULE": "dashboard.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path}/db.sqlite3",
        "VAR_DIR": str(tmp_path),
    }


def test_a_command_gives_its_stdout(tmp_path: Path) -> None:
    assert manage(_env(tmp_path), "shell", "-v", "0", "-c", "print('from the child', 6 * 7)") == "from the child 42\n"


def test_a_failing_command_names_itself_its_exit_code_and_what_it_printed(tmp_path: Path) -> None:
    with pytest.raises(ManageFailed) as failed:
        manage(
            _env(tmp_path), "shell", "-c", "import sys; print('half', 'done'); sys.exit('gave up: no broker %d' % 7)"
        )
    message = str(failed.value)
    assert message.startswith("`manage.py shell -c import sys;") and "failed with exit code 1" in message
    # What it printed, not just the command line (which spells both differently): stdout and stderr.
    assert "half done" in message and "gave up: no broker 7" in message


def test_a_command_that_does_not_finish_is_stopped_and_said_so(tmp_path: Path) -> None:
    # 1 s: the child is stopped whether it is still starting Django or already sleeping.
    with pytest.raises(
        ManageFailed, match=r"`manage.py shell -c import time; time.sleep\(30\)` did not finish within 1 s"
    ):
        manage(_env(tmp_path), "shell", "-c", "import time; time.sleep(30)", timeout=1)
