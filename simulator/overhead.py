"""What a change of a job's resources costs.

The engine classifies every change (``Change``) and asks the overhead model for a
``Transition``: for ``prepare_s`` seconds the job keeps training at the slower of its old
and new rates (stop-free scaling: running workers go on while new ones get ready), then
makes no progress for ``pause_s`` seconds (checkpoint, restart, broadcast), then runs at
the new allocation's rate.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Protocol

from simulator.job import Allocation, JobSpec


class Change(Enum):
    START = "start"          # first start
    RESUME = "resume"        # start again after a preemption or failure
    STOP = "stop"            # preemption: resources released, progress kept
    SCALE_OUT = "scale_out"
    SCALE_IN = "scale_in"
    RESCALE = "rescale"      # some roles grow while others shrink
    MIGRATE = "migrate"      # same task counts, other nodes
    FAIL = "fail"            # a node under the job failed


@dataclass(frozen=True, slots=True)
class Transition:
    prepare_s: float = 0.0
    pause_s: float = 0.0


FREE = Transition()


class OverheadModel(Protocol):
    def transition(self, spec: JobSpec, change: Change, old: Allocation, new: Allocation) -> Transition: ...


@dataclass(frozen=True, slots=True)
class ConstantOverhead:
    """Flat costs, the same for every model.

    ``start_s`` is paid at a job's first start, ``resume_s`` when it restarts after a
    preemption or failure, ``rescale_s`` for every scale or migration (stop-resume: the job
    pauses; stop-free: it keeps training during ``rescale_s`` and pauses only ``pause_s``).
    The defaults (all zero) replay a trace with free reconfiguration.
    """

    start_s: float = 0.0
    resume_s: float = 0.0
    rescale_s: float = 0.0
    stop_free: bool = False
    pause_s: float = 0.0

    def transition(self, spec: JobSpec, change: Change, old: Allocation, new: Allocation) -> Transition:
        if change is Change.START:
            return Transition(pause_s=self.start_s)
        if change is Change.RESUME:
            return Transition(pause_s=self.resume_s)
        if change in (Change.STOP, Change.FAIL):
            return FREE
        if self.stop_free:
            return Transition(prepare_s=self.rescale_s, pause_s=self.pause_s)
        return Transition(pause_s=self.rescale_s)
