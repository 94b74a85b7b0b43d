"""``/healthz``: is every service the dashboard depends on reachable right now."""
