"""Where the private services live by default: the repository's ``var/`` and fixed loopback ports."""

from __future__ import annotations

from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent.parent
DEFAULT_VAR = REPO_ROOT / "var"
DEFAULT_ZK_PORT = 21810
DEFAULT_REDIS_PORT = 26379
DEFAULT_SPARK_CONNECT_PORT = 15002
DEFAULT_PG_PORT = 25432
