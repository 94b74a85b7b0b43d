"""``python -m scripts.devservices`` (what ``scripts/services`` runs)."""

import sys

from scripts.devservices.cli import main

sys.exit(main())
