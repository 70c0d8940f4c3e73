import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# the package lives in src/ (a src layout: a folder named like the package above the clone
# cannot shadow it); the tests import it from there even without an install
for _p in (str(ROOT), str(ROOT / "src")):
    if _p not in sys.path:
        sys.path.insert(0, _p)

import pytest  # noqa: E402
from hypothesis import HealthCheck, settings  # noqa: E402

# HYPOTHESIS_PROFILE picks one: "ci" (default, seconds per suite), "dev", or "slow" (at
# least SLOW_EXAMPLES examples for every property, stateful and differential test, including
# those that set their own count through tests/helpers.py:examples; docs/reliability.md).
SLOW_EXAMPLES = 2000
settings.register_profile("ci", max_examples=40, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", max_examples=100, deadline=None,
                          suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("slow", max_examples=SLOW_EXAMPLES, deadline=None,
                          suppress_health_check=list(HealthCheck))
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(scope="session", autouse=True)
def _engine_cache_dir(tmp_path_factory):
    """Compiled engines go to a folder of this test session (shared by its xdist workers),
    so a run never loads machine code cached from other sources. UVMSIM_TEST_CACHE_DIR
    names a folder to keep between runs instead (local iteration only)."""
    keep = os.environ.get("UVMSIM_TEST_CACHE_DIR")
    if keep:
        d = Path(keep)
    else:
        base = tmp_path_factory.getbasetemp()
        # under xdist each worker has its own basetemp inside the session's
        if os.environ.get("PYTEST_XDIST_WORKER"):
            base = base.parent
        d = base / "uvmsim-engines"
    os.environ["UVMSIM_CACHE_DIR"] = str(d)
    yield
