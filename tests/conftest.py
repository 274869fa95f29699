"""Marks every test with its tier, taken from the folder it lives in."""
import pathlib

import pytest

TIERS = {"unit", "docs", "image", "serving", "gpu"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        tier = pathlib.Path(str(item.fspath)).relative_to(config.rootpath).parts[1:2]
        if tier and tier[0] in TIERS:
            item.add_marker(getattr(pytest.mark, tier[0]))
