"""Gavel and Shockwave ``.trace`` files (stanford-futuredata/gavel, uw-mad-dash/shockwave; MIT).

One job per line, TAB-separated, no header. Three layouts, told apart by the field count
(``scheduler/utils.py::parse_trace`` of each simulator):

* 7 fields (Gavel ``traces/msr/seed=N/<vc>.trace``): job_type, command, num_steps_arg,
  needs_data_dir, total_steps, arrival_time, scale_factor
* 10 fields (Gavel ``physical_cluster``, tests): job_type, command, working_directory,
  num_steps_arg, needs_data_dir, total_steps, scale_factor, priority_weight, SLO, arrival_time
* 12 fields (Shockwave ``reproduce``): as 10, with mode after scale_factor and duration
  before arrival_time

``job_type`` is "Model (batch size B)"; ``total_steps`` are iterations; ``scale_factor`` is the
GPU count; times are seconds. Only Shockwave gives a duration: elsewhere it stays null until
a throughput model turns iterations into time. See docs/traces/gavel.md.

Shockwave's batch-size adaptation (``shockwave`` format, ``adaptation: true``), as its simulator
applies it (uw-mad-dash/shockwave ``scheduler/scheduler.py``, ``scheduler/utils.py``):

* at the end of every round, for every job in the system, ``_simulate_gns`` /
  ``_simulate_accordion`` look at the job's epoch, ``ceil(steps run / ceil(dataset / batch))``
  (``_get_num_epochs``), and flag a larger (or smaller) batch size;
* the flag takes effect at the end of the next round the job runs (``_done_callback`` calls
  ``_scale_bs_and_iters``): gns doubles the batch size, accordion moves to the model's largest
  (``max_bs_dict``) or back to the initial one; a batch size the throughput table lacks is
  refused; the job's total and completed steps are rescaled keeping its number of epochs, and
  its completed epochs are rounded up (``num_completed_epochs = ceil(...)``);
* its speed is the table's (``tacc_throughputs.json``, ``(job type, GPUs) -> null``: steps/s
  alone) at the new batch size; a round runs ``int(throughput x round)`` steps at most;
* a job that has run more than 1.5 x its trace ``duration`` is ended (``is_over_deadline``).

:func:`isolated_seconds` runs these rules for one job that runs every round from its start,
with the simulator's 20 s charge in its first round (``simulate``: a job not scheduled in the
previous round loses 20 s of a full round), and returns its seconds of training (the charge
not included, as the ``shockwave`` overhead model charges it). The ``shockwave`` reader uses it
as the job's duration (``adaptation: true``), so that with ``profile=linear`` a job alone runs as
long as in Shockwave's simulator. docs/traces/gavel.md, docs/peers/shockwave.md.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from clustersim.traces import register
from clustersim.traces.collect import BadRows, Jobs
from clustersim.traces.csvrows import Lines, Ordered, bad_text, no_rows, number, open_text, text, text_error
from clustersim.traces.schema import TraceError, gpu_worker_role

LAYOUTS = {
    7: ("job_type", "command", "num_steps_arg", "needs_data_dir", "total_steps", "arrival_time", "scale_factor"),
    10: ("job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir", "total_steps",
         "scale_factor", "priority_weight", "SLO", "arrival_time"),
    12: ("job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir", "total_steps",
         "scale_factor", "mode", "priority_weight", "SLO", "duration", "arrival_time"),
}
JOB_TYPE = re.compile(r"^(?P<model>.+?) \(batch size (?P<batch>\d+)\)$")
MODES = ("static", "gns", "accordion")


@register("gavel")
def read(path: Path, *, bad: BadRows, cpu_per_gpu: float = 0.0, mem_per_gpu: float = 0.0):
    return _read(path, bad, cpu_per_gpu, mem_per_gpu)


@register("shockwave", files=("throughputs",))
def read_shockwave(path: Path, *, bad: BadRows, cpu_per_gpu: float = 0.0, mem_per_gpu: float = 0.0,
                   adaptation: bool = False, throughputs: str = "bundled:shockwave/tacc_throughputs.json",
                   round_s: float = 120.0):
    """The Gavel reader; with ``adaptation: true`` (12-field layout only) each job's duration is
    its training time alone under Shockwave's batch-size adaptation (``isolated_seconds``: its
    mode, the V100 ``throughputs`` table, rounds of ``round_s``) instead of the trace's
    ``duration`` (its time at the initial batch size)."""
    if not isinstance(adaptation, bool):
        raise TraceError(f"{path}: option adaptation must be true or false, got {adaptation!r}")
    if not (isinstance(round_s, (int, float)) and round_s > 0):
        raise TraceError(f"{path}: option round_s must be a positive number of seconds, got {round_s!r}")
    if not adaptation:
        return _read(path, bad, cpu_per_gpu, mem_per_gpu)
    from clustersim.traces import resolve
    try:
        table = Throughputs.read(resolve(throughputs))
    except (OSError, ValueError) as e:
        raise TraceError(f"{path}: option throughputs: {e}") from None
    return _read(path, bad, cpu_per_gpu, mem_per_gpu, lambda *job: _adapted(path, table, round_s, *job))


def _adapted(path: Path, table: "Throughputs", round_s: float, line: int, r: dict, model: str,
             batch: int | None, gpus: float, steps: float, duration: float | None) -> float:
    if "mode" not in r:
        raise TraceError(f"{path}: line {line}: option adaptation needs Shockwave's 12-field layout (mode, duration); "
                         f"this row has {len(r)} fields", line=line)
    try:
        seconds = isolated_seconds(model, batch or 0, int(gpus), int(steps), r["mode"].strip(), duration,
                                   table, round_s).seconds
    except KeyError as e:
        raise TraceError(f"{path}: line {line}: field 'job_type': {e.args[0]} in the throughput table",
                         line=line, field="job_type") from None
    except ValueError as e:
        raise TraceError(f"{path}: line {line}: {e}", line=line) from None
    return seconds


def _read(path: Path, bad: BadRows, cpu_per_gpu: float, mem_per_gpu: float, adapt=None):
    jobs = Jobs(path, bad)
    order = Ordered(path, "arrival_time")
    tenant = path.stem
    data = 0
    with open_text(path) as f:
        for line, raw in Lines(path, f).numbered():
            raw = raw.rstrip("\r\n")
            if not raw.strip():
                continue
            data += 1
            values = raw.split("\t")
            with jobs.row(line, values):
                if bad_text(raw):
                    raise text_error(path, line)
                names = LAYOUTS.get(len(values))
                if names is None:
                    raise TraceError(f"{path}: line {line}: expected 7, 10 or 12 TAB-separated fields, "
                                     f"got {len(values)} (truncated or malformed row)", line=line)
                r = dict(zip(names, values))
                model, batch = _job_type(path, line, r["job_type"])
                num = lambda k, **c: number(path, line, k, r[k], **c)  # noqa: E731
                if r["needs_data_dir"].strip() not in ("0", "1"):
                    raise TraceError(f"{path}: line {line}: field 'needs_data_dir': expected 0 or 1, "
                                     f"got {r['needs_data_dir']!r}", line=line, field="needs_data_dir")
                if "mode" in r and r["mode"].strip() not in MODES:
                    raise TraceError(f"{path}: line {line}: field 'mode': unknown value {r['mode']!r} "
                                     f"(expected one of {', '.join(MODES)})", line=line, field="mode")
                arrival = num("arrival_time", minimum=0)
                gpus = num("scale_factor", positive=True, integer=True)
                priority = num("priority_weight", positive=True, integer=True) if "priority_weight" in r else None
                steps = num("total_steps", positive=True, integer=True)
                duration = num("duration", positive=True) if "duration" in r else None
                if adapt is not None:
                    duration = adapt(line, r, model, batch, gpus, steps, duration)
                order.check(line, arrival)
                jobs.add(str(line - 1), arrival, [gpu_worker_role(gpus, cpu_per_gpu, mem_per_gpu)],
                         iterations=steps, duration=duration, model=model, batch_size=batch, tenant=tenant,
                         priority=None if priority is None else int(priority))
    if not data:
        raise no_rows(path)
    return jobs.table()


def _job_type(path: Path, line: int, value: str) -> tuple[str, int | None]:
    """'ResNet-50 (batch size 64)' -> ('ResNet-50', 64); a bare name keeps no batch size."""
    s = text(path, line, "job_type", value)
    m = JOB_TYPE.match(s)
    return (m["model"], int(m["batch"])) if m else (s, None)


# ------------------------------------------------------------- Shockwave's batch-size adaptation
# scheduler.py dataset_size_dict: samples per epoch of each model's dataset
DATASET_SIZE = {"ResNet-18": 50000, "ResNet-50": 100000, "Transformer": 10000, "LM": 59675,
                "Recommendation": 117907}
# scheduler.py _scale_bs_and_iters max_bs_dict: the largest batch size of a model that adapts
MAX_BS = {"LM": 80, "ResNet-18": 256, "ResNet-50": 128, "Recommendation": 8192}
# _simulate_gns does not flag a job at these batch sizes; _simulate_accordion does not shrink one at MIN_BS
GNS_TOP = {"ResNet-18": 256, "ResNet-50": 128, "Transformer": 128, "LM": 80, "Recommendation": 8192}
MIN_BS = {"ResNet-18": 16, "ResNet-50": 16, "Transformer": 16, "LM": 5, "Recommendation": 512}
# utils.py get_gns_bs_pattern: (model, initial batch, GPUs) -> (first epoch, multiplier of the
# initial batch) from that epoch on; other jobs keep their batch. Capped at GNS_TOP (its bs_limit).
GNS_STEPS = {
    ("ResNet-18", 16, 1): ((31, 2), (41, 4), (51, 8), (71, 16)),
    ("ResNet-18", 32, 1): ((21, 2), (31, 4), (51, 8)),
    ("ResNet-18", 64, 1): ((11, 2), (31, 4)),
    ("ResNet-18", 128, 1): ((11, 2),),
    ("ResNet-18", 16, 2): ((21, 2), (31, 4), (91, 8), (111, 16)),
    ("ResNet-18", 32, 2): ((11, 2), (21, 4), (41, 8)),
    ("ResNet-18", 64, 2): ((21, 2), (41, 4)),
    ("ResNet-18", 128, 2): ((41, 2),),
    ("ResNet-18", 16, 4): ((11, 2), (21, 4), (81, 8), (91, 16)),
    ("ResNet-18", 32, 4): ((21, 2), (31, 4), (61, 8)),
    ("ResNet-18", 64, 4): ((11, 2), (61, 4)),
    ("ResNet-18", 128, 4): ((11, 2),),
    ("ResNet-50", 64, 1): ((101, 2),),
    ("ResNet-50", 32, 2): ((101, 2), (111, 4)),
    ("ResNet-50", 64, 2): ((81, 2),),
    ("ResNet-50", 32, 4): ((131, 2), (221, 4)),
    ("ResNet-50", 64, 4): ((191, 2),),
    ("LM", 5, 1): ((31, 2), (41, 4), (61, 8), (71, 16)),
    ("LM", 10, 1): ((11, 2), (21, 4), (41, 8)),
    ("LM", 20, 1): ((11, 2), (41, 4)),
    ("LM", 40, 1): ((11, 2),),
    ("LM", 5, 2): ((31, 2), (51, 4), (61, 8), (71, 16)),
    ("LM", 10, 2): ((11, 2), (31, 4), (41, 8)),
    ("LM", 20, 2): ((31, 2), (41, 4)),
    ("LM", 40, 2): ((11, 2),),
    ("LM", 5, 4): ((11, 2), (31, 4), (71, 8), (91, 16)),
    ("LM", 10, 4): ((11, 2), (31, 4), (61, 8)),
    ("LM", 20, 4): ((11, 2), (61, 4)),
    ("LM", 40, 4): ((61, 2),),
    ("Recommendation", 512, 1): ((21, 2), (41, 4), (71, 8), (91, 16)),
    ("Recommendation", 1024, 1): ((21, 2), (51, 4), (91, 8)),
    ("Recommendation", 2048, 1): ((21, 2), (41, 4)),
    ("Recommendation", 4096, 1): ((41, 2),),
}
RESUME_CHARGE_S = 20.0   # scheduler.py simulate: preemption_overhead, charged in a job's first round
DEADLINE_FACTOR = 1.5    # scheduler.py _done_callback: is_over_deadline


def gns_batch(model: str, initial: int, gpus: int, epoch: int) -> int:
    """get_gns_bs_pattern's batch size at ``epoch`` (the simulator asks for at least 760 epochs,
    so its end-of-list cases never apply)."""
    mult = 1
    for first, m in GNS_STEPS.get((model, initial, gpus), ()):
        if epoch >= first:
            mult = m
    return min(initial * mult, GNS_TOP.get(model, initial * mult))


def in_critical_regime(model: str, initial: int, epoch: int) -> bool | None:
    """_simulate_accordion's critical regime (None: the model does not adapt)."""
    if model == "LM":
        return epoch < 10
    if model == "Recommendation":
        head = {512: 30, 1024: 30, 2048: 40, 4096: 10, 8192: 10}.get(initial)
        return None if head is None else epoch < head
    if model == "ResNet-50":
        return epoch % 30 < 10
    if model == "ResNet-18":
        head = 20 if initial == 256 else 10
        return epoch < head or 150 <= epoch < 160 or 250 <= epoch < 260
    return None   # Transformer: "Accordion cannot be applied to transformer jobs for now"


def flag(mode: str, model: str, initial: int, gpus: int, batch: int, epoch: int) -> str | None:
    """The request a round's end makes: "big", "small" or None (_simulate_gns, _simulate_accordion)."""
    if mode == "gns":
        if batch != GNS_TOP.get(model) and max(gns_batch(model, initial, gpus, epoch),
                                               gns_batch(model, initial, gpus, epoch + 1)) > batch:
            return "big"
    elif mode == "accordion":
        critical = in_critical_regime(model, initial, epoch)
        if critical is None:
            return None
        if batch == initial and not critical and batch != GNS_TOP.get(model):
            return "big"
        if batch != initial and critical and batch != MIN_BS.get(model):
            return "small"
    return None


@dataclass
class Throughputs:
    """tacc_throughputs.json's V100 steps/s of a job type alone, keyed (job type, GPUs)."""

    table: dict

    @classmethod
    def read(cls, path: Path) -> "Throughputs":
        with open(path) as f:
            raw = json.load(f)
        out = {}
        for key, row in raw.get("v100", {}).items():
            m = re.match(r"^\('(.*)', (\d+)\)$", key)   # utils.py parse_job_type_tuple
            if m and isinstance(row, dict) and "null" in row:
                out[(m[1], int(m[2]))] = float(row["null"])
        return cls(out)

    def get(self, model: str, batch: int, gpus: int) -> float | None:
        return self.table.get((f"{model} (batch size {batch})", gpus))


class Adapted(NamedTuple):
    """A job's training under Shockwave's adaptation rules (``isolated_seconds``)."""

    seconds: float                     # of training (the 20 s charges not included)
    phases: list[tuple[int, float]]    # (batch size, seconds of training at it), in order
    charged: int                       # rounds that lost the 20 s charge


def isolated_seconds(model: str, batch: int, gpus: int, steps: int, mode: str, duration: float,
                     tput: Throughputs, round_s: float = 120.0, resumed=lambda k: k == 0) -> Adapted:
    """A job's training under Shockwave's rules when it runs round after round; ``resumed(k)``:
    whether its k-th round (from 0) follows a round it did not run (the simulator's 20 s charge),
    by default only its first. Raises ``KeyError`` when the table lacks the initial batch size,
    ``ValueError`` when a round is too short for one step."""
    rate = tput.get(model, batch, gpus)
    if rate is None:
        raise KeyError(f"no V100 throughput for {model} (batch size {batch}) on {gpus} GPU(s)")
    ipe = lambda b: math.ceil(DATASET_SIZE[model] / b)   # noqa: E731  steps per epoch
    initial, total, done, seconds, pending, charged = batch, steps, 0, 0.0, None, 0
    cap = int(int(duration) * DEADLINE_FACTOR)
    phases: list[list] = [[batch, 0.0]]
    done_now = lambda: Adapted(seconds, [(b, s) for b, s in phases if s > 0], charged)  # noqa: E731
    k = 0
    while True:
        n = min(int(rate * round_s), total - done)
        if n <= 0:
            raise ValueError(f"a round of {round_s:g} s runs no step of {model} at batch {batch} "
                             f"({rate:g} steps/s); option round_s")
        t = n / rate
        if resumed(k) and t != 0 and round_s - 5 < t:   # simulate: a full round after none loses 20 s
            n = int(n * (t - RESUME_CHARGE_S) / t)
            t -= RESUME_CHARGE_S
            charged += 1
        k += 1
        done += n
        seconds += t
        phases[-1][1] += t
        if done >= total or seconds > cap:
            return done_now()
        if pending is not None:
            new = _rescaled(model, initial, batch, pending, mode, gpus, tput)
            if new is not None:
                old_ipe, new_ipe = ipe(batch), ipe(new)
                epochs = math.ceil(total / old_ipe)
                total = math.ceil(total * (1 / (new / batch)))
                if math.ceil(total / new_ipe) != epochs:
                    total = new_ipe * epochs
                done = math.ceil(done / old_ipe) * new_ipe
                batch, rate = new, tput.get(model, new, gpus)
                phases.append([batch, 0.0])
                if done >= total:   # rounded up to its last epoch's end: nothing left to run
                    return done_now()
        pending = flag(mode, model, initial, gpus, batch, math.ceil(done / ipe(batch)))


def _rescaled(model: str, initial: int, batch: int, request: str, mode: str, gpus: int,
              tput: Throughputs) -> int | None:
    """_scale_bs_and_iters: the new batch size, or None where the request is refused."""
    if MAX_BS.get(model) == initial:
        return None
    if mode == "gns":
        new = 2 * batch
    elif mode == "accordion":
        new = MAX_BS[model] if request == "big" else initial
    else:
        return None
    return new if tput.get(model, new, gpus) is not None else None
