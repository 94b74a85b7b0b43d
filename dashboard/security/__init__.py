"""Request hardening for the dashboard: action size and rate limits, audited rejections (issue #10)."""
