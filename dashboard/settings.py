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
"""

from __future__ import annotations

import secrets
from pathlib import Path

from celery.schedules import crontab

from dashboard.lib.env import env_bool, env_int, env_list, env_str, parse_database_url

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("VAR_DIR", str(BASE_DIR / "var")))

PRODUCTION = env_bool("DJANGO_PRODUCTION", False)
DEBUG = env_bool("DJANGO_DEBUG", False)


def _secret_key() -> str:
    configured = env_str("DJANGO_SECRET_KEY", "")
    if configured:
        return configured
    if PRODUCTION:
        raise RuntimeError("DJANGO_SECRET_KEY must be set when DJANGO_PRODUCTION=1")
    key_file = VAR_DIR / "secret_key"
    try:
        return key_file.read_text().strip()
    except FileNotFoundError:
        VAR_DIR.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(50)
        key_file.write_text(key)
        key_file.chmod(0o600)
        return key


SECRET_KEY = _secret_key()
ALLOWED_HOSTS = env_list("DJANGO_ALLOWED_HOSTS", ["127.0.0.1", "localhost"])
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
    "dashboard.accounts",
    "dashboard.health",
    "dashboard.clusters",
    "dashboard.analytics",
    "dashboard.actions",
    "workers",
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
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

DATABASES = {"default": parse_database_url(env_str("DATABASE_URL", "sqlite:///var/db.sqlite3"), str(BASE_DIR))}
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
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
# A page calls the mirror stale when its heartbeat is older than this.
MIRROR_STALE_AFTER_S = env_int("MIRROR_STALE_AFTER_S", 5)
# Broker agents' GET /v1/state (live lag) is fetched with this timeout.
BROKER_AGENT_TIMEOUT_S = float(env_str("BROKER_AGENT_TIMEOUT_S", "1.0"))

CHANNEL_LAYERS = {
    "default": {
        "BACKEND": "channels_redis.core.RedisChannelLayer",
        "CONFIG": {"hosts": [REDIS_URL], "capacity": 1500, "expiry": 30},
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
CELERY_BEAT_SCHEDULE = {
    "analytics-nightly": {"task": "workers.analytics.nightly", "schedule": crontab(hour=0, minute=30)},
    # Audit (issue #7): copy each cluster's state-change stream into the database, in order.
    "actions-ingest": {"task": "workers.actions.ingest_state_changes", "schedule": 5.0},
    # Audit retention (issue #7): delete audit rows older than AUDIT_RETENTION_DAYS, once a day.
    "audit-retention": {"task": "workers.retention.cleanup", "schedule": crontab(hour=1, minute=15)},
}

SESSION_COOKIE_HTTPONLY = True
CSRF_COOKIE_HTTPONLY = False
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
SECURE_REFERRER_POLICY = "same-origin"
if PRODUCTION:
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = env_bool("SECURE_SSL_REDIRECT", True)
    SECURE_HSTS_SECONDS = env_int("SECURE_HSTS_SECONDS", 31536000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = True
    SECURE_HSTS_PRELOAD = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": env_str("LOG_LEVEL", "INFO")},
    "loggers": {"kazoo": {"level": "WARNING"}},
}
