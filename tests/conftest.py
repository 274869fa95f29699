"""Marks every test with its tier, taken from the folder it lives in."""
import os
import pathlib

import pytest
from hypothesis import HealthCheck, Phase, settings
from hypothesis.database import DirectoryBasedExampleDatabase, ReadOnlyDatabase

# The generated cases (Hypothesis) of every boundary, under one profile per purpose:
# - "ci" (the default, every tier and CI): a fixed budget of examples per test, derandomized (the same
#   examples on every run, so CI is deterministic and a red run reproducible), no per-example deadline
#   (a loaded 2-core host must not fail a test by the clock: tests that bound time bound it
#   themselves, with margins). No database: Hypothesis makes derandomize=True imply database=None
#   (it refuses both together, as it drops the database under @seed and --hypothesis-seed too), so
#   CI replays its stored cases through the explicit phase: every failing example ever found is kept
#   as an `@example` on its test, or a row of the corpus (tests/support/bad_inputs.py).
# - "dev": many more examples, randomized, saving every failure it finds into EXAMPLES (committed);
#   a developer runs it to look for new cases (tests/hypothesis_examples/README.md says the steps).
# - "replay": only the explicit examples and the stored ones, read-only: no generation, and a budget
#   above the stored count, so every stored example runs in a fixed order (Hypothesis samples them at
#   random only when they outnumber max_examples) and nothing is written.
EXAMPLES = pathlib.Path(__file__).parent / "hypothesis_examples"
STORED = ReadOnlyDatabase(DirectoryBasedExampleDatabase(EXAMPLES))
settings.register_profile("ci", max_examples=60, derandomize=True, deadline=None, database=None,
                          suppress_health_check=(HealthCheck.too_slow,), print_blob=True)
settings.register_profile("dev", max_examples=2000, deadline=None, database=DirectoryBasedExampleDatabase(EXAMPLES),
                          suppress_health_check=(HealthCheck.too_slow,), print_blob=True)
settings.register_profile("replay", max_examples=100_000, deadline=None, database=STORED,
                          phases=(Phase.explicit, Phase.reuse),
                          suppress_health_check=(HealthCheck.too_slow,), print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# The image runs as uid 10001 (group 0) by default, and the image and serving tiers mount pytest's
# temporary folders into its containers: pytest makes each one 0700 for its own uid, which the server's
# uid could neither read (a model, a probe script) nor write (a cache, a report). Each is opened to
# every uid, as a user's model and cache folders must be (docs/deploy.md); their parent, pytest's
# base folder, stays 0700, so no other user of the host reaches them.
_mktemp = pytest.TempPathFactory.mktemp


def _mktemp_for_any_uid(self, basename: str, numbered: bool = True):
    path = _mktemp(self, basename, numbered)
    path.chmod(0o777)
    return path


pytest.TempPathFactory.mktemp = _mktemp_for_any_uid

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
