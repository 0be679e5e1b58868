"""Golden results: the stored summaries of small runs covering every policy, compared exactly.
A deliberate change of simulated behaviour regenerates them with `make golden` (see tests/golden)."""

import pytest

from tests.golden import CASES, differences, stored, summary_of

GOLDEN = stored()


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden_summary_is_unchanged(name):
    assert name in GOLDEN, f"no golden summary for {name!r}: run `make golden` and review the diff"
    diff = differences(GOLDEN[name], summary_of(CASES[name]))
    assert not diff, f"{name}: simulated results moved (run `make golden` if deliberate):\n" + "\n".join(diff)
