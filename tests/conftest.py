"""Marks every test with its tier, taken from the folder it lives in."""
import pathlib

import pytest

# The order the tiers run in: the unit and docs tiers first, while the image tier's build (started
# when collection ends, tests/image/conftest.py) runs beside them; then the tiers that need it.
TIERS = ("unit", "docs", "image", "serving", "gpu")


def tier_of(config, item) -> str | None:
    parts = pathlib.Path(str(item.fspath)).relative_to(config.rootpath).parts[1:2]
    return parts[0] if parts and parts[0] in TIERS else None


def pytest_collection_modifyitems(config, items):
    order = {}
    for item in items:
        tier = tier_of(config, item)
        if tier:
            item.add_marker(getattr(pytest.mark, tier))
        order[item.nodeid] = TIERS.index(tier) if tier else len(TIERS)
    items.sort(key=lambda item: order[item.nodeid])
