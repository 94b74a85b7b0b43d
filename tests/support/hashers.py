"""The password hasher of the in-process Django tests: production's PBKDF2-SHA256 at a low work factor.

Why: one hash at Django's 1,000,000 iterations is 0.4-0.8 s of CPU on the 2-core CI machine, and the
Django tests create users with passwords by the hundred (each ``create_user(..., password=...)`` and
each password login is one hash); three of the action-API modules spent more than half their time
there. The algorithm, the stored format (``pbkdf2_sha256$<iterations>$<salt>$<hash>``) and every code
path (``make_password``, ``check_password``, the login form, axes' lock-out) stay production's; only
the iteration count is lower. The stacks the tests start as subprocesses (daphne, Celery workers,
``manage.py``) run the product's settings, at the full work factor.
"""

from __future__ import annotations

from django.contrib.auth.hashers import PBKDF2PasswordHasher


class QuickPBKDF2PasswordHasher(PBKDF2PasswordHasher):
    """PBKDF2-SHA256 with 1,000 iterations (a hash stored at any other count still verifies)."""

    iterations = 1_000
