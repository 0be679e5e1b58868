"""The CI fuzz profile: every bundled sample (cut to its first 60 lines) under every mutation of
``fuzz_cases``, loaded with on_bad_row error and skip, each within 10 s and 64 MB of Python
allocations. The larger local profile: ``.venv/bin/python tools/fuzz_traces.py`` (see its doc)."""

from collections import Counter

import pytest

from tests.traces.fuzz_cases import SAMPLES, VERDICTS, baseline, cases, run_case

MAX_LINES = 60
ALL = cases(MAX_LINES)


@pytest.mark.parametrize("sample", SAMPLES, ids=[s.name for s in SAMPLES])
def test_every_malformed_variant_ends_in_a_located_error_or_a_documented_skip(sample, tmp_path):
    verdicts, failures = {}, []
    for mode in ("error", "skip"):
        base = baseline(sample, tmp_path / f"base-{mode}", mode, MAX_LINES)
        for i, case in enumerate(c for c in ALL if c.sample == sample):
            try:
                verdicts[case.target, case.mutation, mode] = run_case(
                    case, tmp_path / f"{i}-{mode}", mode, base, max_lines=MAX_LINES, seconds=10, megabytes=64).verdict
            except AssertionError as e:
                failures.append(str(e))
    assert failures == []
    counts = Counter(verdicts.values())
    assert set(counts) <= set(VERDICTS) and counts["located error"] > 0
    main = "path"
    # anchors: what the mutations that have one right answer must give, in both modes
    for mode in ("error", "skip"):
        for m in ("empty", "utf16", "directory", "missing_file", "long_line"):
            if m in ("empty", "long_line") and sample.json and mode == "skip":
                assert verdicts[main, m, mode] == "documented skip"  # the unreadable rest: one reject
                continue
            assert verdicts[main, m, mode] == "located error", (m, mode)
        if not sample.json:
            assert verdicts[main, "crlf", mode] == verdicts[main, "utf8_bom", mode] == "accepted"
    if not sample.json:
        assert verdicts[main, "non_utf8", "error"] == "located error"
        assert verdicts[main, "non_utf8", "skip"] in ("documented skip", "located error")


def test_the_profile_covers_every_format_and_mutation_class():
    from clustersim import traces
    from tests.traces.fuzz_cases import MUTATIONS
    assert {s.format for s in SAMPLES} == set(traces.formats())
    assert {c.mutation for c in ALL} == set(MUTATIONS)
    assert len(ALL) == 573
