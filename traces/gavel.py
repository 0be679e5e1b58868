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
"""

from __future__ import annotations

import re
from pathlib import Path

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


@register("shockwave")
@register("gavel")
def read(path: Path, *, bad: BadRows, cpu_per_gpu: float = 0.0, mem_per_gpu: float = 0.0):
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
                order.check(line, arrival)
                jobs.add(str(line - 1), arrival, [gpu_worker_role(gpus, cpu_per_gpu, mem_per_gpu)],
                         iterations=num("total_steps", positive=True, integer=True),
                         duration=num("duration", positive=True) if "duration" in r else None,
                         model=model, batch_size=batch, tenant=tenant,
                         priority=None if priority is None else int(priority))
    if not data:
        raise no_rows(path)
    return jobs.table()


def _job_type(path: Path, line: int, value: str) -> tuple[str, int | None]:
    """'ResNet-50 (batch size 64)' -> ('ResNet-50', 64); a bare name keeps no batch size."""
    s = text(path, line, "job_type", value)
    m = JOB_TYPE.match(s)
    return (m["model"], int(m["batch"])) if m else (s, None)
