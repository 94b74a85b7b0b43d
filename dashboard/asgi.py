"""The ASGI application: Django for HTTP, Channels for WebSockets.

Django's ASGI app is created first (it sets up the app registry) before anything that imports
models. WebSockets pass the allowed-hosts origin check and session authentication.
"""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "dashboard.settings")
django_asgi_app = get_asgi_application()

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from django.conf import settings  # noqa: E402
from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler  # noqa: E402

from dashboard.routing import websocket_urlpatterns  # noqa: E402
from dashboard.security.websocket import audited_allowed_hosts_origin_validator  # noqa: E402

http_app = ASGIStaticFilesHandler(django_asgi_app) if settings.SERVE_STATIC else django_asgi_app

application = ProtocolTypeRouter(
    {
        "http": http_app,
        # Channels' AllowedHostsOriginValidator, with foreign origins audited (issue #10).
        "websocket": audited_allowed_hosts_origin_validator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
    }
)
