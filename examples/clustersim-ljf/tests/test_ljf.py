"""The plug-in's own tests, as an outside package writes them: its policy passes clustersim's
conformance suite (``pip install clustersim[dev]`` for hypothesis), and its reader reads the sample."""

from clustersim import traces
from clustersim.conformance import check_policy
from clustersim_ljf.policy import LargestJobFirst


def test_ljf_conforms():
    check_policy(LargestJobFirst)
    check_policy(LargestJobFirst, params={"backfill": False}, examples=5, determinism=False)


def test_the_sample_reads():
    table = traces.read("sacct", "pkg:clustersim_ljf/data/sacct_sample.csv")
    assert table.num_rows == 12
    assert sorted(set(table["num_gpus"].to_pylist())) == [1.0, 2.0, 4.0, 8.0]
