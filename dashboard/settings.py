"""Django settings, all read from the environment with defaults that run on one machine.

Defaults are for the single-machine stack started by the README's first command: SQLite under
``var/``, the private Redis and ZooKeeper of ``scripts/services``. Production sets
``DJANGO_PRODUCTION=1``, which demands a real secret and turns on secure cookies and HSTS.

| variable | default |
|---|---|
| ``DJANGO_SECRET_KEY`` | generated once into ``var/secret_key`` (refused in production) |
| ``DJANGO_DEBUG`` | false |
| ``DJANGO_ALLOWED_HOSTS`` | ``127.0.0.1,localhost`` |
| ``DATABASE_URL`` | ``sqlite:///var/db.sqlite3`` (``postgres://user:pass@host:5432/name`` for PostgreSQL) |
| ``REDIS_URL`` | ``redis://127.0.0.1:26379/0`` |
| ``ZOOKEEPER_CONNECT`` | ``127.0.0.1:21810/kafka`` (host:port[,host:port...][/chroot]) |
| ``STATE_CHANGE_LOG_DIR`` | ``var/state-change-log`` |

Production and request-limit variables (``DJANGO_CSRF_TRUSTED_ORIGINS``, ``SECURE_SSL_REDIRECT``,
``ACTION_MAX_BODY_BYTES``, ``ACTION_RATE_LIMIT``, ``ZOOKEEPER_AUTH``, ...) are listed in
``docs/deployment.md``.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from celery.schedules import crontab

from controller_core.zk.client import ZkSecurity
from dashboard.lib.env import env_bool, env_int, env_list, env_str, parse_database_url
from dashboard.security.ratelimit import parse_limit
from dashboard.security.secrets import development_key, weak_secret_reason

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))

PRODUCTION = env_bool("DJANGO_PRODUCTION", False)
DEBUG = env_bool("DJANGO_DEBUG", False)


def _secret_key() -> str:
    configured = env_str("DJANGO_SECRET_KEY", "")
    if configured:
        weak = weak_secret_reason(configured) if PRODUCTION else ""
        if weak:
            raise RuntimeError(f"DJANGO_SECRET_KEY is unusable in production: {weak}")
        return configured
    if PRODUCTION:
        raise RuntimeError("DJANGO_SECRET_KEY must be set when DJANGO_PRODUCTION=1")
    return development_key(VAR_DIR / "secret_key")


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
if PRODUCTION and (not ALLOWED_HOSTS or "*" in ALLOWED_HOSTS):
    raise RuntimeError("DJANGO_ALLOWED_HOSTS must list the dashboard's host names (not '*') when DJANGO_PRODUCTION=1")
# Exact origins (scheme://host[:port]) a TLS-terminating proxy serves the dashboard on.
CSRF_TRUSTED_ORIGINS = env_list("DJANGO_CSRF_TRUSTED_ORIGINS", [])

INSTALLED_APPS = [
    "daphne",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "channels",
    "axes",
    "dashboard.accounts",
    "dashboard.health",
    "dashboard.clusters",
    "dashboard.analytics",
    "dashboard.audit",
    "dashboard.actions",
    "dashboard.security",
    "workers",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    # Login lock-out (django-axes): a locked-out address gets 429. Before the sync-only middleware
    # below, so Django runs it in sync mode (its async path drops the credentials).
    "axes.middleware.AxesMiddleware",
    # Size and rate limits on action requests, answered before any view or CSRF check reads the body.
    "dashboard.security.middleware.ActionRequestLimitsMiddleware",
    # Every page needs a login except the ones marked @login_not_required (login, /healthz).
    "django.contrib.auth.middleware.LoginRequiredMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "dashboard.urls"
ASGI_APPLICATION = "dashboard.asgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

# CONN_MAX_AGE 0 under Daphne (ASGI): see parse_database_url; DATABASE_CONN_MAX_AGE overrides it.
DATABASES = {
    "default": parse_database_url(
        env_str("DATABASE_URL", "sqlite:///var/db.sqlite3"), str(BASE_DIR), env_int("DATABASE_CONN_MAX_AGE", 0)
    )
}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
# Login throttling (django-axes, see docs/deployment.md): after LOGIN_FAILURE_LIMIT failed logins
# from one client address, every login from that address is refused (429, no password checked) for
# LOGIN_LOCKOUT_MINUTES, counted again from each further attempt. Locked by address, not by username,
# so an attacker cannot lock a real operator out of their own account. Counts live in the database
# (shared by every web process); every attempt, locked or not, is also a LOGIN_FAILED audit row.
# `manage.py axes_reset_ip ADDRESS` lifts a lock-out early.
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",
    "django.contrib.auth.backends.ModelBackend",
]
AXES_ENABLED = env_bool("LOGIN_THROTTLING", True)
AXES_FAILURE_LIMIT = env_int("LOGIN_FAILURE_LIMIT", 10)
AXES_COOLOFF_TIME = timedelta(minutes=env_int("LOGIN_LOCKOUT_MINUTES", 15))
AXES_LOCKOUT_PARAMETERS = ["ip_address"]
AXES_RESET_ON_SUCCESS = True
AXES_DISABLE_ACCESS_LOG = True  # successes and failures are audited as Action rows already
AXES_HTTP_RESPONSE_CODE = 429
AXES_VERBOSE = False
if AXES_FAILURE_LIMIT < 1 or AXES_COOLOFF_TIME.total_seconds() < 1:
    raise ValueError("LOGIN_FAILURE_LIMIT and LOGIN_LOCKOUT_MINUTES must be positive")

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "home"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = VAR_DIR / "staticfiles"
# The single-machine stack serves static files from the ASGI app; behind a proxy, turn this off.
SERVE_STATIC = env_bool("SERVE_STATIC", True)

REDIS_URL = env_str("REDIS_URL", "redis://127.0.0.1:26379/0")
ZOOKEEPER_CONNECT = env_str("ZOOKEEPER_CONNECT", "127.0.0.1:21810/kafka")
ZOOKEEPER_SESSION_TIMEOUT_S = env_int("ZOOKEEPER_SESSION_TIMEOUT_S", 10)
STATE_CHANGE_LOG_DIR = Path(env_str("STATE_CHANGE_LOG_DIR", str(VAR_DIR / "state-change-log")))
HEALTH_CHECK_TIMEOUT_S = float(env_str("HEALTH_CHECK_TIMEOUT_S", "2.0"))

# Live dashboard (issue #6). METRICS_TOKEN: bearer token for /clusters/<name>/metrics scrapers
# (a logged-in user may read it too); empty disables token access.
METRICS_TOKEN = env_str("METRICS_TOKEN", "")
MIRROR_WINDOW_MS = env_int("MIRROR_WINDOW_MS", 150)
# Every partition state is re-read this often (0: 15 s for observed clusters, 60 s for managed).
MIRROR_SWEEP_S = env_int("MIRROR_SWEEP_S", 0)
MIRROR_LOCK_TTL_S = env_int("MIRROR_LOCK_TTL_S", 10)
MIRROR_DEFAULT_MIN_ISR = env_int("MIRROR_DEFAULT_MIN_ISR", 1)
# A process hosting a mirror hands the GIL over every MIRROR_GIL_SWITCH_US microseconds (Python's
# default: 5000; 0 leaves it): kazoo's reader waits that long for the GIL after each socket call
# while the mirror thread computes. 1000: observed storm p99 2.08 s -> 1.60 s at load 3.3-4.1
# (workers/mirror/host.py, docs/dashboard.md "The mirror").
MIRROR_GIL_SWITCH_US = env_int("MIRROR_GIL_SWITCH_US", 1000)
# Hosting (issue #32, docs/deployment.md "Hosting"): workers follow the cluster registry. Each mirror-role
# worker mirrors at most MIRROR_MAX_CLUSTERS clusters; each managed cluster gets
# CONTROLLER_CANDIDATES_PER_CLUSTER candidates on distinct controller-role workers (at most
# CONTROLLER_MAX_CLUSTERS each), holding slot leases of CONTROLLER_SLOT_TTL_S; the registry is re-read
# every HOSTING_POLL_S. MIRROR_CLUSTERS / CONTROLLER_CLUSTERS (worker environment) are optional filters.
MIRROR_MAX_CLUSTERS = env_int("MIRROR_MAX_CLUSTERS", 8)
CONTROLLER_CANDIDATES_PER_CLUSTER = env_int("CONTROLLER_CANDIDATES_PER_CLUSTER", 2)
CONTROLLER_MAX_CLUSTERS = env_int("CONTROLLER_MAX_CLUSTERS", 8)
CONTROLLER_SLOT_TTL_S = env_int("CONTROLLER_SLOT_TTL_S", 10)
HOSTING_POLL_S = float(env_str("HOSTING_POLL_S", "1.0"))
# Registering a cluster connects to its ZooKeeper for at most this long to check it (form and API).
CLUSTER_PROBE_TIMEOUT_S = float(env_str("CLUSTER_PROBE_TIMEOUT_S", "4.0"))
# A page calls the mirror stale when its heartbeat is older than this.
MIRROR_STALE_AFTER_S = env_int("MIRROR_STALE_AFTER_S", 5)
# Broker agents' GET /v1/state (live lag) is fetched with this timeout.
BROKER_AGENT_TIMEOUT_S = float(env_str("BROKER_AGENT_TIMEOUT_S", "1.0"))

# socket_timeout: channels_redis receives with a 5 s BZPOPMIN, and redis-py 8 reads every reply with a
# 5 s socket timeout by default; Redis answers an expired pop up to 100 ms late, so a consumer that
# heard nothing for 5 s (the mirror busy with a big resync) died of "Timeout reading from". 30 s
# outlasts the pop and any pause of Redis short of an outage (tests/integration/test_channel_layer_idle.py).
CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {
            "hosts": [{"address": REDIS_URL, "socket_timeout": 30, "socket_connect_timeout": 5}],
            "capacity": 1500,
            "expiry": 30,
        },
    }
}

CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", REDIS_URL)
CELERY_RESULT_BACKEND = env_str("CELERY_RESULT_BACKEND", REDIS_URL)
CELERY_TASK_ACKS_LATE = True
CELERY_TASK_REJECT_ON_WORKER_LOST = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_TRANSPORT_OPTIONS = {"visibility_timeout": 3600}
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
# Analytics (issue #8): report on the previous UTC day every night (workers.analytics.tasks.nightly).
# Issue #30: today's analytics every ANALYTICS_CURRENT_EVERY_S (skipped when nothing new was logged),
# computed by the warm Spark Connect server at SPARK_REMOTE ("" = a JVM in the worker, not advised).
SPARK_REMOTE = env_str("SPARK_REMOTE", "sc://127.0.0.1:15002")
ANALYTICS_CURRENT_EVERY_S = float(env_str("ANALYTICS_CURRENT_EVERY_S", "180"))
CELERY_BEAT_SCHEDULE = {
    "analytics-nightly": {"task": "workers.analytics.nightly", "schedule": crontab(hour=0, minute=30)},
    "analytics-current": {"task": "workers.analytics.current", "schedule": ANALYTICS_CURRENT_EVERY_S},
    # Audit (issue #7): copy each cluster's state-change stream into the database, in order.
    "audit-ingest": {"task": "workers.audit.ingest_state_changes", "schedule": 5.0},
    # Audit retention (issue #7): delete audit rows older than AUDIT_RETENTION_DAYS, once a day.
    "audit-retention": {"task": "workers.retention.cleanup", "schedule": crontab(hour=1, minute=15)},
    # Admin tasks whose worker died after a duplicate delivery was acked: re-queued (workers.actions).
    "actions-recover-stalled": {"task": "workers.actions.recover_stalled", "schedule": 15.0},
    # Issue #29: replication throttles of finished reassignments still in ZooKeeper are removed, audited.
    "reassign-orphan-throttles": {"task": "workers.reassign.remove_orphan_throttles", "schedule": 60.0},
}
# Audit rows (actions and ingested state changes) older than this are deleted by that task.
AUDIT_RETENTION_DAYS = env_int("AUDIT_RETENTION_DAYS", 365)

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SAMESITE = "Lax"
CSRF_COOKIE_HTTPONLY = False  # the pages' fetch() reads it to send X-CSRFToken
CSRF_COOKIE_SAMESITE = "Lax"
# A failed CSRF check is answered with a clear 403 and audited (REQUEST_REJECTED).
CSRF_FAILURE_VIEW = "dashboard.security.views.csrf_failure"
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
SECURE_CROSS_ORIGIN_OPENER_POLICY = "same-origin"
if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    # Off only when a TLS-terminating proxy already redirects plain HTTP itself.
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    if not SECURE_SSL_REDIRECT:  # a deliberate choice (the proxy redirects), not the W008 oversight
        SILENCED_SYSTEM_CHECKS = ["security.W008"]
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = env_bool("SECURE_HSTS_INCLUDE_SUBDOMAINS", True)
    SECURE_HSTS_PRELOAD = env_bool("SECURE_HSTS_PRELOAD", True)
    # Trust X-Forwarded-Proto only behind a proxy that sets it (and strips the client's own).
    if env_bool("DJANGO_BEHIND_TLS_PROXY", True):
        SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

# Action requests (POST, PUT, PATCH, DELETE under /actions/ and /api/v1/): body size limit (413) and a
# per-user rate limit (429 with Retry-After), enforced by dashboard.security.middleware.
ACTION_MAX_BODY_BYTES = env_int("ACTION_MAX_BODY_BYTES", 256 * 1024)
ACTION_RATE_LIMIT = env_str("ACTION_RATE_LIMIT", "30/60")  # requests/seconds per user; "0" turns it off
parse_limit(ACTION_RATE_LIMIT)  # a malformed value fails at start-up
# Every other request body (forms, admin) stays under Django's own limit (RequestDataTooBig -> 400).
DATA_UPLOAD_MAX_MEMORY_SIZE = env_int("DJANGO_DATA_UPLOAD_MAX_MEMORY_SIZE", 2_621_440)

# The topic admin API refuses deletions when off (the controller's delete.topic.enable should match).
TOPIC_DELETION_ENABLED = env_bool("TOPIC_DELETION_ENABLED", True)

# Optional ZooKeeper digest ACLs (controller_core/zk/client.py): "digest:user:password" authenticates
# every client this process creates; ZOOKEEPER_ACL=1 makes the znodes it creates creator-writes,
# world-reads. Controller and broker processes read the same two variables from the environment.
ZOOKEEPER_AUTH = env_str("ZOOKEEPER_AUTH", "")
ZOOKEEPER_ACL = env_str("ZOOKEEPER_ACL", "0")
ZkSecurity.parse(ZOOKEEPER_AUTH, ZOOKEEPER_ACL)  # a malformed value fails at start-up, not at first use

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    # django-axes logs several lines per failed login: under a brute force that floods the log. Every
    # attempt is an audit row (LOGIN_FAILED, locked_out marked) instead; errors still show.
    "loggers": {"kazoo": {"level": "WARNING"}, "axes": {"level": "ERROR"}},
}
