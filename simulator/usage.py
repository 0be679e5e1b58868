"""What a running job's tasks use, as an observer would measure it (``JobView.usage``) and as the
fault model checks memory against (``faults.World.usage``).

A usage model that is ``load_aware`` (``Zoo.usage``) is told the job's state: its rate now (CPU
follows throughput), the share of its work done (embedding tables grow with the samples seen) and
its hidden memory need (``faults.oom``: a job needing ``need_factor`` x its profile's memory).
The observer sees all three, as a real profiler's readings would show them. The fault model gets
the use at a given share of the work (default the end, the peak) without the hidden need, which it
applies itself (``FaultModel.need``): it times an OOM when the growing memory crosses the grant.
"""

from __future__ import annotations


class BoundUsage:
    """``usage(spec, alloc)`` of the engine's jobs: ``observed`` for the views, ``peak`` for faults."""

    def __init__(self, usage, states: dict, clock, faults=None):
        self.usage, self.states, self.clock, self.faults = usage, states, clock, faults
        self.aware = bool(getattr(usage, "load_aware", False))

    def need(self, job_id: str) -> float:
        """The job's hidden memory need: the fault model's underprovisioned jobs (drawn there at
        the run's start) need ``oom.need_factor`` x the profile's memory."""
        return self.faults.need(job_id) if self.faults is not None else 1.0

    def _load(self, spec) -> tuple[float, float]:
        st = self.states[spec.job_id]
        done = st.progress + st.rate * max(self.clock.now - st.since, 0.0)
        return st.rate, (done / spec.total_work if spec.total_work > 0 else 1.0)

    def observed(self, spec, alloc) -> dict[str, tuple[float, float]]:
        if not self.aware:
            return self.usage(spec, alloc)
        rate, progress = self._load(spec)
        return self.usage(spec, alloc, rate=rate, progress=progress, need=self.need(spec.job_id))

    def peak(self, spec, alloc, progress: float = 1.0) -> dict[str, tuple[float, float]]:
        """Use after ``progress`` of the work (default: the end, where memory peaks), without the
        hidden need (the fault model applies it)."""
        if not self.aware:
            return self.usage(spec, alloc)
        return self.usage(spec, alloc, rate=self.states[spec.job_id].rate, progress=progress)
