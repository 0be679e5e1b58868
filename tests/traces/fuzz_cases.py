"""Malformed variants of every bundled trace sample, and the rule each load must follow.

A case is (sample, the input file spoiled, a mutation). Loaded with ``on_bad_row`` error and
skip, it must end, within a time and memory budget, in one of:

* ``located error``: a ``TraceError`` whose message names the spoiled file;
* ``documented skip``: a valid table, with the bad rows counted as rejects (or documented
  drops) beyond those of the unspoiled sample;
* ``accepted``: a valid table with nothing more rejected; for a mutation the format's docs
  call harmless (CRLF, a UTF-8 BOM, blank lines, an extra CSV column, a reordered unsorted
  export) the table must equal the unspoiled one.

Anything else (another exception, a hang, a blow-up, a changed table where none may change)
is a failure. ``tests/traces/test_fuzz.py`` runs the CI profile; ``tools/fuzz_traces.py``
the larger local one (every line of the real traces, big garbage, in sandboxed workers).
"""

from __future__ import annotations

import random
import signal
import time
import tracemalloc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from clustersim import traces
from clustersim.traces import DATA
from clustersim.traces.collect import BadRows
from clustersim.traces.schema import TraceError, validate

S = DATA / "samples"
VERDICTS = ("located error", "documented skip", "accepted")


@dataclass(frozen=True)
class Sample:
    name: str
    format: str
    files: dict  # option -> bundled file ("path" is the main one)
    options: dict = field(default_factory=dict)
    json: bool = False  # a JSON log (Philly) rather than lines of text

    def __hash__(self):
        return hash(self.name)


SAMPLES = [
    Sample("tiresias", "tiresias", {"path": DATA / "tiresias/60_job.csv"}),
    Sample("elasticflow_ef", "elasticflow", {"path": DATA / "elasticflow/ef/195job.csv"}),
    Sample("elasticflow_raw", "elasticflow", {"path": DATA / "elasticflow/raw/cluster10.csv"}),
    Sample("gavel", "gavel", {"path": DATA / "gavel/small_test.trace"}),
    Sample("shockwave", "shockwave", {"path": S / "shockwave/reproduce_sample.trace"}),
    Sample("pollux", "pollux", {"path": S / "pollux/workload.csv"}),
    Sample("philly_pollux", "philly_pollux", {"path": DATA / "philly_pollux/philly.csv"}),
    Sample("openb", "openb", {"path": DATA / "alibaba_v2023/openb_pod_list_default.csv"}),
    Sample("openb_multigpu", "openb", {"path": DATA / "alibaba_v2023/openb_pod_list_multigpu50.csv"}),
    Sample("helios", "helios", {"path": S / "helios/cluster_log.csv"}),
    Sample("csv", "csv", {"path": S / "csv/jobs.csv"}),
    Sample("philly", "philly", {"path": S / "philly/cluster_job_log", "machine_list": S / "philly/cluster_machine_list"},
           json=True),
    Sample("alibaba_pai2020", "alibaba_pai2020",
           {"path": S / "alibaba_pai2020/pai_job_table.csv", "task_table": S / "alibaba_pai2020/pai_task_table.csv",
            "instance_table": S / "alibaba_pai2020/pai_instance_table.csv",
            "group_tag_table": S / "alibaba_pai2020/pai_group_tag_table.csv"}),
    Sample("google2011", "google2011", {"path": S / "google2011/job_events.csv",
                                        "task_events": S / "google2011/task_events.csv"}),
    Sample("google2019", "google2019", {"path": S / "google2019/collection_events.csv",
                                        "instance_events": S / "google2019/instance_events.json"}),
]
HEADERLESS = {"gavel", "shockwave", "google2011", "alibaba_pai2020"}  # no header line in the data files
UNSORTED = {"google2019"}  # formats whose docs say row order carries no meaning (reorder -> same table)


# --- mutations: bytes -> bytes (or DIRECTORY). ``rng`` is seeded per case.

DIRECTORY = object()


def _lines(b: bytes) -> list[bytes]:
    return b.splitlines(keepends=True)


def _data_start(s: Sample, target: str) -> int:
    """Index of the first data line: 0 in a headerless file or a JSON-lines export."""
    if s.format in HEADERLESS or s.json or str(s.files[target]).endswith(".json"):
        return 0
    return 1


def _edit_field(value: bytes) -> Callable:
    """Replace one numeric field of a data line (the first field that parses as a number)."""
    def mutate(b, rng, s, target):
        lines = _lines(b)
        start = _data_start(s, target)
        if len(lines) <= start:
            return b + value
        i = rng.randrange(start, len(lines))
        sep = b"\t" if s.format in ("gavel", "shockwave") else b","
        parts = lines[i].split(sep)
        numeric = [k for k, p in enumerate(parts) if _is_number(p.strip().strip(b'"'))]
        k = rng.choice(numeric) if numeric else 0
        end = b"\n" if parts[k].endswith(b"\n") else b""
        quote = b'"' if parts[k].strip().startswith(b'"') else b""
        parts[k] = quote + value + quote + end
        lines[i] = sep.join(parts)
        return b"".join(lines)
    return mutate


def _is_number(b: bytes) -> bool:
    try:
        float(b)
        return True
    except ValueError:
        return False


def _truncate_line(b, rng, s, target):
    lines = [x for x in _lines(b) if x.strip()]
    return b"".join(lines[:-1]) + lines[-1][: len(lines[-1]) // 2] if lines else b


def _insert_bytes(junk: bytes):
    def mutate(b, rng, s, target):
        lines = _lines(b)
        i = rng.randrange(_data_start(s, target), len(lines)) if len(lines) > _data_start(s, target) else 0
        line = lines[i] if lines else b""
        k = rng.randrange(max(len(line) - 1, 1))
        lines[i:i + 1] = [line[:k] + junk + line[k:]]
        return b"".join(lines)
    return mutate


def _reorder(kind: str):
    def mutate(b, rng, s, target):
        lines = _lines(b)
        if lines and not lines[-1].endswith(b"\n"):
            lines[-1] += b"\n"
        k = _data_start(s, target)
        body = lines[k:]
        body = body[::-1] if kind == "reverse" else rng.sample(body, len(body))
        return b"".join(lines[:k] + body)
    return mutate


def _duplicate_row(b, rng, s, target):
    lines = _lines(b)
    k = _data_start(s, target)
    if len(lines) <= k:
        return b
    if not lines[-1].endswith(b"\n"):
        lines[-1] += b"\n"
    return b"".join(lines + [lines[rng.randrange(k, len(lines))]])


def _columns(op: str):
    def mutate(b, rng, s, target):
        sep = b"\t" if s.format in ("gavel", "shockwave") else b","
        out = []
        for i, line in enumerate(_lines(b)):
            body, end = line.rstrip(b"\r\n"), line[len(line.rstrip(b"\r\n")):]
            parts = body.split(sep)
            if op == "extra":
                parts.append(b"extra" if i == 0 and _data_start(s, target) else b"1")
            elif len(parts) > 1:
                del parts[1]
            out.append(sep.join(parts) + end)
        return b"".join(out)
    return mutate


def _garbage(size: int):
    def mutate(b, rng, s, target):
        return rng.randbytes(size)
    return mutate


def _json_deep(depth: int):
    def mutate(b, rng, s, target):
        if s.json:
            return b.replace(b'"attempts": [', b'"attempts": [' + b"[" * depth + b"]" * depth + b",", 1)
        lines = _lines(b)
        return b"".join(lines[:1] + [b'{"time": ' + b"[" * depth + b"]" * depth + b"}\n"] + lines[1:])
    return mutate


def _json_type_swap(b, rng, s, target):
    """A JSON value of the wrong type (a string where a number is, an object where a list is)."""
    for old, new in ((b'"attempts": [', b'"attempts": {"x": ['), (b'"cpus": 0', b'"cpus": {"a": 0'),
                     (b'"type": 0', b'"type": "zero"')):
        if old in b:
            return b.replace(old, new, 1)
    return b.replace(b"[", b"{", 1)


MUTATIONS: dict[str, Callable] = {
    "empty": lambda b, rng, s, t: b"",
    "header_only": lambda b, rng, s, t: b"".join(_lines(b)[:1]),
    "truncated_line": _truncate_line,
    "truncated_half": lambda b, rng, s, t: b[: len(b) // 2],
    "non_utf8": _insert_bytes(b"\xff\xfe\xc3"),
    "nul_bytes": _insert_bytes(b"\x00\x00"),
    "utf16": lambda b, rng, s, t: b.decode("utf-8").encode("utf-16"),
    "utf8_bom": lambda b, rng, s, t: b"\xef\xbb\xbf" + b,
    "crlf": lambda b, rng, s, t: b.replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"),
    "blank_lines": lambda b, rng, s, t: b.replace(b"\n", b"\n\n") if not s.json else b + b"\n\n",
    "nan": _edit_field(b"nan"),
    "inf": _edit_field(b"inf"),
    "negative": _edit_field(b"-5"),
    "huge_float": _edit_field(b"1e308"),
    "huge_int": _edit_field(b"1000000000"),
    "far_time": _edit_field(b"1000000000000000"),
    "not_a_number": _edit_field(b"lots"),
    "reversed": _reorder("reverse"),
    "shuffled": _reorder("shuffle"),
    "duplicate_row": _duplicate_row,
    "extra_column": _columns("extra"),
    "missing_column": _columns("drop"),
    "wrong_delimiter": lambda b, rng, s, t: b.replace(b"\t", b",") if s.format in ("gavel", "shockwave")
    else b.replace(b",", b";"),
    "garbage": _garbage(64 * 1024),
    "long_line": lambda b, rng, s, t: b + b"x" * (2 * 1024 * 1024),
    "json_deep": _json_deep(100_000),
    "json_type": _json_type_swap,
    "directory": lambda b, rng, s, t: DIRECTORY,
    "missing_file": lambda b, rng, s, t: None,
}
JSON_ONLY = {"json_deep", "json_type"}


def benign(mutation: str, s: Sample, target: str) -> bool:
    """Mutations after which the table must not change."""
    if mutation in ("crlf", "utf8_bom"):
        return not s.json
    if mutation == "blank_lines":  # except where a job's id is its line number
        return s.format not in ("gavel", "shockwave", "philly_pollux")
    if mutation == "extra_column":
        return _data_start(s, target) == 1 and not s.json
    if mutation in ("reversed", "shuffled"):
        return s.format in UNSORTED
    return False


@dataclass(frozen=True)
class Case:
    sample: Sample
    target: str  # the option whose file is spoiled
    mutation: str

    @property
    def id(self) -> str:
        return f"{self.sample.name}:{self.target}:{self.mutation}"


def cases(max_lines: int | None = 60) -> list[Case]:
    """Every (sample, input file, mutation); JSON mutations only for JSON inputs.
    ``max_lines`` cuts each sample to its first lines (the CI profile); None keeps them whole."""
    out = []
    for s in SAMPLES:
        for target, p in s.files.items():
            is_json = s.json or str(p).endswith(".json")
            for m in MUTATIONS:
                if m in JSON_ONLY and not is_json:
                    continue
                out.append(Case(s, target, m))
    return out


# --- running a case


class Budget(Exception):
    pass


@dataclass
class Outcome:
    verdict: str
    detail: str


def prepare(case: Case, root: Path, max_lines: int | None, seed: int = 0) -> dict:
    """Write the sample (cut to ``max_lines``) under ``root`` with the target file spoiled;
    return the reader's arguments {option: path}."""
    rng = random.Random(f"{seed}:{case.id}")
    root.mkdir(parents=True, exist_ok=True)
    files = {}
    for opt, src in case.sample.files.items():
        data = _cut(src.read_bytes(), max_lines, case.sample)
        dst = root / src.name
        if opt == case.target:
            data = MUTATIONS[case.mutation](data, rng, case.sample, opt)
        if data is DIRECTORY:
            dst.mkdir()
        elif data is not None:
            dst.write_bytes(data)
        files[opt] = dst
    return files


def _cut(data: bytes, max_lines: int | None, s: Sample) -> bytes:
    if max_lines is None or s.json:
        return data
    lines = _lines(data)
    return b"".join(lines[:max_lines]) if len(lines) > max_lines else data


def load(sample: Sample, files: dict, mode: str):
    bad = BadRows(mode)
    path = files["path"]
    opts = {k: v for k, v in files.items() if k != "path"}
    table = traces.read(sample.format, path, bad=bad, **sample.options, **opts)
    return table, bad


def run_case(case: Case, root: Path, mode: str, baseline, *, max_lines: int | None = 60,
             seconds: float = 10.0, megabytes: float = 256.0, measure_memory: bool = True) -> Outcome:
    """Load one case; return its verdict or raise AssertionError describing the failure.
    ``baseline`` is (table, BadRows) of the unspoiled sample in the same mode."""
    files = prepare(case, root, max_lines)
    spoiled = files[case.target]
    if measure_memory:
        tracemalloc.start()
    old = signal.signal(signal.SIGALRM, _alarm)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    t0 = time.perf_counter()
    try:
        table, bad = load(case.sample, files, mode)
    except TraceError as e:
        msg = str(e)
        assert spoiled.name in msg, f"{case.id} [{mode}]: error does not name {spoiled.name}: {msg[:300]}"
        return Outcome("located error", msg[:300])
    except Budget:
        raise AssertionError(f"{case.id} [{mode}]: over the time budget of {seconds:g} s") from None
    except Exception as e:  # noqa: BLE001 - any other exception is what the fuzz suite looks for
        raise AssertionError(f"{case.id} [{mode}]: {type(e).__name__}: {str(e)[:300]}") from e
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        peak = tracemalloc.get_traced_memory()[1] if measure_memory else 0
        if measure_memory:
            tracemalloc.stop()
        assert peak <= megabytes * 2**20, f"{case.id} [{mode}]: {peak / 2**20:.0f} MB over the {megabytes:g} MB budget"
    elapsed = time.perf_counter() - t0
    validate(table, str(spoiled))
    base_table, base_bad = baseline
    if benign(case.mutation, case.sample, case.target):
        assert table.equals(base_table), f"{case.id} [{mode}]: a harmless change changed the table"
        return Outcome("accepted", f"same table ({elapsed:.2f} s)")
    extra = bad.rejected - base_bad.rejected, sum(bad.dropped.values()) - sum(base_bad.dropped.values())
    if extra[0] > 0 or extra[1] > 0:
        assert mode == "skip" or extra[0] == 0, f"{case.id} [{mode}]: rejects under on_bad_row error"
        return Outcome("documented skip", f"{extra[0]} rejected, {extra[1]} dropped")
    return Outcome("accepted", f"{table.num_rows} jobs")


def _alarm(signum, frame):
    raise Budget()


def baseline(sample: Sample, root: Path, mode: str, max_lines: int | None):
    files = {}
    root.mkdir(parents=True, exist_ok=True)
    for opt, src in sample.files.items():
        dst = root / src.name
        dst.write_bytes(_cut(src.read_bytes(), max_lines, sample))
        files[opt] = dst
    return load(sample, files, mode)
