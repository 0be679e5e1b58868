"""docs/outputs.md documents every column and key a run writes: read against a real run's files."""

import json
import re
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from clustersim.experiment import compose, run

DOC = Path(__file__).resolve().parent.parent / "docs" / "outputs.md"


def documented(heading: str) -> list[re.Pattern]:
    """The names in backticks under ``### <heading>`` (to the next heading of that level or
    above); ``<type>`` in a name stands for any word."""
    text = DOC.read_text()
    m = re.search(rf"^###? {re.escape(heading)}.*?$(.*?)(?=^##? |^### |\Z)", text, re.M | re.S)
    assert m, f"docs/outputs.md has no section {heading!r}"
    names = {n.strip() for tick in re.findall(r"`([^`]+)`", m.group(1)) for n in tick.split(",")}
    return [re.compile("^" + re.sub(r"<[^>]+>", r"\\w+", re.escape(n).replace(r"\<", "<").replace(r"\>", ">")) + "$")
            for n in names if n]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("run") / "r"
    run(compose(["progress=false"]), out)
    return out


@pytest.mark.parametrize("name, heading", [("jobs.parquet", "jobs.parquet"), ("timeline.parquet", "timeline.parquet"),
                                           ("events.parquet", "events.parquet"), ("tenants.parquet", "tenants.parquet")])
def test_every_column_of_the_run_files_is_documented(run_dir, name, heading):
    pats = documented(heading)
    missing = [c for c in pq.read_schema(run_dir / name).names if not any(p.match(c) for p in pats)]
    assert missing == [], f"docs/outputs.md, {heading}: document {missing}"


@pytest.mark.parametrize("name, heading", [("summary.json", "summary.json"), ("run.json", "run.json")])
def test_every_key_of_the_json_files_is_documented(run_dir, name, heading):
    pats = documented(heading)
    missing = [k for k in json.loads((run_dir / name).read_text()) if not any(p.match(k) for p in pats)]
    assert missing == [], f"docs/outputs.md, {heading}: document {missing}"
