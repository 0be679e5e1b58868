"""A job's progress between events: its rate, the reconfiguration phases ahead of it, the refunds
when a change overlaps them, and the throughput samples policies observe.

Between events a job trains at a constant rate, so its completion time is computed, not stepped.
A change of allocation (``change``) runs through phases (docs/models/overhead.md): ``prepare_s``
at the slower of the old and new rates, then ``pause_s`` at rate 0, then the new steady rate. What
a phase costs against the steady rate is charged as lost (``overhead_s``); a later change that
arrives while phases are still ahead refunds what they were charged and charges them again against
the new rate. ``stop`` and ``finish`` end the job's training, ``rescale`` scales every rate ahead
(a fault model's slowdown), ``end_phase`` moves to the next phase.

``Progress`` mutates only a ``JobState``'s progress fields (rate, steady_rate, phases, version,
busy_until, overhead_s, overhead_gpu_s, samples, progress) and schedules nothing: each call
returns ``Next``, the times the engine must schedule, so it is tested on one ``JobState``.
"""

from __future__ import annotations

from typing import NamedTuple

from clustersim.simulator.job import JobState
from clustersim.simulator.overhead import Transition

DONE = 1 - 1e-12   # a phase ending with this fraction of the work done ends the job (rounding of rate x time)


class Next(NamedTuple):
    """What the engine schedules after a change of a job's rate (absolute times, None: nothing)."""

    phase_end: float | None    # the current reconfiguration phase ends
    completion: float | None   # the job completes, at the current rate, before any phase end


class Progress:
    """Rates, phases and samples of jobs. Throughput samples carry a relative measurement error of
    ``noise`` (standard deviation, one draw per steady interval from ``rng``); the last ``kept``
    intervals are kept per job."""

    def __init__(self, noise: float = 0.0, kept: int = 32, rng=None):
        self.noise = noise
        self.kept = kept
        self._rng = rng if noise > 0 else None
        self._block: list[float] = []   # draws of rng ahead, last first (drawn in blocks: the same sequence)

    # ------------------------------------------------------------------ changes
    def change(self, st: JobState, rate: float, tr: Transition, now: float, gpus: float) -> tuple[float, Next]:
        """The job moves to a new allocation (already set on ``st``) training at ``rate`` once the
        transition ``tr`` is over, holding ``gpus`` from now. Returns the seconds of training lost
        to the transition and what to schedule."""
        if not (st.phases or tr.prepare_s or tr.pause_s):
            # a free change with nothing ahead (a replay without overheads): no phase, nothing lost;
            # what _set_phases does with no phase
            st.steady_rate = rate
            st.gpus = gpus
            st.phases = None
            st.busy_until = now
            st.version += 1
            return 0.0, self._enter_phase(st, now)
        old_rate = st.steady_rate
        # phases still ahead of an earlier change keep their own rates (capped by the new one); what
        # they were charged against the old rate is refunded and charged again against the new one
        phases = [(d, min(r, rate)) for d, r in self.refund(st, now)] if st.phases else []
        phases += [(tr.prepare_s, min(old_rate, rate)), (tr.pause_s, 0.0)]
        lost = sum(d * (1.0 - r / rate) for d, r in phases)
        st.steady_rate = rate
        st.gpus = gpus
        if lost:
            st.overhead_s += lost
            st.overhead_gpu_s += lost * gpus
        return lost, self._set_phases(st, phases, now)

    def rescale(self, st: JobState, k: float, now: float) -> Next:
        """Every rate ahead of the job is ``k`` x what it was (progress is up to date at ``now``)."""
        st.steady_rate *= k
        if st.phases:
            st.phases = [(end, r * k) for end, r in st.phases]
        st.version += 1
        return self._enter_phase(st, now)

    def end_phase(self, st: JobState, now: float) -> Next | None:
        """The current phase ended at ``now`` (progress is up to date): None if the job's work is
        done (the engine finishes it), else the next phase or the steady rate begins."""
        if st.progress >= st.spec.total_work * DONE:
            return None
        st.phases.pop()
        st.version += 1
        return self._enter_phase(st, now)

    def stop(self, st: JobState, now: float) -> None:
        """The job stops training, keeping its progress: the phases it will not go through are
        refunded."""
        self.refund(st, now)
        self._still(st, now)
        st.busy_until = now

    def finish(self, st: JobState, now: float) -> None:
        """The job's work is done at ``now``. Phases still ahead are not refunded: a job that
        completes inside a phase keeps the whole phase's charge (the engine's rule since overheads
        were charged; changing it would move the golden figures of runs with overheads)."""
        st.progress = st.spec.total_work
        self._still(st, now)

    def refund(self, st: JobState, now: float) -> list[tuple[float, float]]:
        """The reconfiguration phases still ahead as (duration, rate), soonest first; what they
        were charged as lost (against the steady rate) is taken back."""
        if not st.phases:
            return []
        out, refund = [], 0.0
        t = now
        for end, rate in reversed(st.phases):
            d = end - t
            t = end
            if d > 0:
                out.append((d, rate))
                refund += d * (1.0 - rate / st.steady_rate) if st.steady_rate > 0 else d
        st.overhead_s -= refund
        st.overhead_gpu_s -= refund * st.gpus
        return out

    # ------------------------------------------------------------------ phases
    def _set_phases(self, st: JobState, phases, now: float) -> Next:
        t = now
        ahead = []
        for duration, rate in phases:
            if duration > 0:
                t += duration
                ahead.append((t, rate))
        ahead.reverse()   # soonest last: pop() ends a phase
        st.phases = ahead or None
        st.busy_until = t
        st.version += 1
        return self._enter_phase(st, now)

    def _enter_phase(self, st: JobState, now: float) -> Next:
        """Set the rate of the current phase; its end and, if sooner, the completion."""
        end = None
        if st.phases:
            end, rate = st.phases[-1]
        else:
            st.phases = None
            rate = st.steady_rate
        st.rate = rate
        self.sample(st, now, steady=end is None)
        finish = None
        if rate > 0:
            finish = now + (st.spec.total_work - st.progress) / rate
            if end is not None and finish >= end:
                finish = None
        return Next(end, finish)

    def _still(self, st: JobState, now: float) -> None:
        st.rate, st.steady_rate, st.phases = 0.0, 0.0, None
        st.version += 1
        self.sample(st, now, steady=False)

    # ------------------------------------------------------------------ samples
    def sample(self, st: JobState, now: float, steady: bool) -> None:
        """Close the job's open throughput sample; open one for a steady phase."""
        samples = st.samples
        if samples and samples[-1][1] is None:
            samples[-1][1] = now
            if samples[-1][1] <= samples[-1][0]:
                samples.pop()
        if steady and st.rate > 0:
            noise = 1.0
            if self._rng is not None:
                if not self._block:
                    self._block = self._rng.standard_normal(1024).tolist()[::-1]
                noise = 1.0 + self.noise * self._block.pop()
                noise = 0.01 if 0.01 > noise else noise   # max(noise, 0.01), without the builtin's call
            if samples is None:
                samples = st.samples = []
            samples.append([now, None, st.rate * noise, st.allocation])
            if len(samples) > self.kept:
                del samples[0]
