"""Pages of the live dashboard (server-rendered; ``static/js/live.js`` keeps them live)."""
