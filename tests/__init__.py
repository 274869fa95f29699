"""The test tiers. REPO is the repository's root, for every test and support module."""
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
