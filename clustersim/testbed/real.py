"""The engine on the wall clock with real jobs: ``TestbedEngine`` and its process table ``Tasks``.

``TestbedEngine`` is the simulator's ``Engine`` with two things replaced:
- the clock: the wall clock, in seconds since the run's start. Before handling an event or a
  decision at time t, the engine's loop waits until t seconds have passed (``_wait_until``), so
  arrivals, policy wake-ups and decisions happen at their times in real seconds. An action that
  blocks the loop (a checkpoint being written) delays the events behind it, as it would delay a
  real scheduler: they are handled late, each at its own time;
- the speed model: no completion is computed (``Reported``). Every ``poll_s`` (an event of the
  engine's own heap) the engine reads each running job's iterations from its rank 0
  (``Tasks.progress``) and ends the job when it reports its work done. Between polls a job's
  progress stands still (what a scheduler knows is the last report). Polling stops once nothing
  is running, queued or to be decided: then nothing more can happen, and jobs still pending end
  the run unfinished.
Everything else is the engine's own: views, validation of the policy's allocations, the
cluster's bookkeeping, the change classification, the ``Recorder`` and its outputs. After the
engine has applied a decision, ``Tasks`` carries it out for real: stops first (each job checkpoints
and exits, freeing its cores), then the starts, resumes and rescales, by ``mechanism``:
``stop_resume`` (checkpoint, exit, relaunch at the new size, restore) or ``stop_free`` (EDL §4.2:
newcomers prepare while the job trains; the group re-forms after one agreed iteration).
A parameter-server job (a ``ps`` role) runs its PS as the lowest ranks of each generation; a
stop-free rescale changes its workers only, and a change of its PS count is carried out as a
stop-resume (its shards are re-cut from the checkpoint) whatever the mechanism.

The time a change cost a job (``overhead_s`` of its event and of the job) is measured: from the
decision to the first iteration of the new generation (starts, resumes, stop-resume rescales), or
the switch's pause (stop-free: last iteration of the old group to the first of the new). Until
then the job's view says it is ``reconfiguring``, as the simulated job's does during its phases.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import dataclass, field
from pathlib import Path

from clustersim.simulator.engine import URGENT, Engine
from clustersim.simulator.job import EMPTY, JobState, task_counts
from clustersim.simulator.overhead import Change
from clustersim.simulator.progress import Next, Progress

MECHANISMS = ("stop_resume", "stop_free")


@dataclass
class _Job:
    spec: dict                      # what every task of the job gets (model, batch, target, ...)
    gen: int = -1                   # the current generation (-1: never started)
    world: int = 0
    procs: dict = field(default_factory=dict)    # rank -> Process of the current generation
    leaving: list = field(default_factory=list)  # processes of a stop-free scale-in, still exiting
    cores: dict = field(default_factory=dict)    # rank -> core
    commands: int = 0               # commands sent so far
    newcomers: set = field(default_factory=set)  # ranks launched by the latest stop-free scale-out
    started: int = -1               # the generation the latest start or resume launched
    saved: int = 0                  # iterations in the latest checkpoint


class Tasks:
    """The testbed's processes: one spawned, core-pinned Python per task, a ``TCPStore`` hosted
    here through which tasks rendezvous, report and receive commands."""

    def __init__(self, cores: list[int], workdir: Path, timeout_s: float, report_s: float, check_s: float, lr: float):
        import torch.distributed as dist
        import torch.multiprocessing as mp

        from clustersim.simulator.calibration.launch import free_port

        self.ctx = mp.get_context("spawn")          # a fresh Python per task: its start is part of the cost
        self.port = free_port()
        self.store = dist.TCPStore("127.0.0.1", self.port, is_master=True, wait_for_workers=False,
                                   timeout=_td(timeout_s))
        self.load = {int(c): 0 for c in cores}      # tasks pinned to each core now
        self.workdir, self.timeout, self.report_s, self.check_s, self.lr = workdir, timeout_s, report_s, check_s, lr
        self.jobs: dict[str, _Job] = {}

    def add(self, job_id: str, model: dict, batch: int, iterations: int, rate: float) -> None:
        """A job of the trace: ``rate`` (predicted iterations/s) sets how often it reads commands."""
        check_every = max(1, int(round(rate * self.check_s)))    # a command is read every ~check_s seconds
        self.jobs[job_id] = _Job({"model": model, "batch": int(batch), "target": int(iterations), "lr": self.lr,
                                  "ckpt": str(self.workdir / f"{job_id}.pt"), "report_s": self.report_s,
                                  "check_every": check_every, "ps": 0})

    # --- actions
    def start(self, job_id: str, n: int, ps: int = 0) -> None:
        """Launch generation g+1 with ``n`` tasks, of which ``ps`` parameter servers (ranks
        0..ps-1; 0: a data-parallel job); they restore the checkpoint if there is one."""
        j = self.jobs[job_id]
        if not 0 <= ps < n:
            raise ValueError(f"testbed: job {job_id!r} needs a worker besides its {ps} PS, got {n} tasks")
        j.gen, j.world, j.spec["ps"] = j.gen + 1, n, int(ps)
        j.started = j.gen
        for rank in range(n):
            self._launch(j, job_id, rank, newcomer=False)

    def stop(self, job_id: str) -> int:
        """Tell the job to checkpoint and exit; wait for it; the iterations it keeps.

        A job still starting (no iteration yet since its start or resume: its tasks are importing
        torch) has nothing new to save: its tasks are ended at once and it keeps its last
        checkpoint, rather than holding the scheduler until they could save."""
        j = self.jobs[job_id]
        if self.first(job_id, j.started) is None:
            for proc in j.procs.values():
                proc.kill()
                proc.join(5)
            self._release(j, j.procs)
            return j.saved
        self._command(j, job_id, {"op": "stop"})
        self._join(j, j.procs)
        exit_rec = self._get(f"{job_id}/g{j.gen}/exit")
        done = self._get(f"{job_id}/done")
        # the job may have finished its work between the poll and the command: then it reports done
        j.saved = int((exit_rec or done)["it"])
        return j.saved

    def resize(self, job_id: str, n_new: int) -> None:
        """Stop-free: scale out (newcomers prepare, then join) or in (leaving ranks exit) to
        ``n_new`` tasks. A PS job's PS (the lowest ranks) stay: only its workers come and go."""
        j = self.jobs[job_id]
        n_old = j.world
        self._command(j, job_id, {"op": "resize", "world": n_new, "old_world": n_old, "gen": j.gen + 1})
        j.gen, j.world = j.gen + 1, n_new
        j.newcomers = set(range(n_old, n_new))
        for rank in range(n_old, n_new):
            self._launch(j, job_id, rank, newcomer=True)
        for rank in range(n_new, n_old):
            j.leaving.append((j.procs.pop(rank), j.cores.pop(rank)))

    def finish(self, job_id: str) -> None:
        """The job reported its work done: its tasks exit. Newcomers of a scale-out the job finished
        before could take place wait for a group that never forms: they are ended."""
        j = self.jobs[job_id]
        if self.first(job_id, j.gen) is None:
            for rank in j.newcomers:
                j.procs[rank].kill()
                j.procs[rank].join(5)
                self.load[j.cores.pop(rank)] -= 1
                del j.procs[rank]
        self._join(j, j.procs)

    # --- what the tasks report
    def progress(self, job_id: str) -> dict | None:
        return self._get(f"{job_id}/it")

    def done(self, job_id: str) -> dict | None:
        return self._get(f"{job_id}/done")

    def first(self, job_id: str, gen: int) -> dict | None:
        return self._get(f"{job_id}/g{gen}/first")

    def exit_of(self, job_id: str, gen: int) -> dict | None:
        return self._get(f"{job_id}/g{gen}/exit")

    def check(self) -> None:
        """A task that failed fails the run (naming the job); exited leaving tasks free their cores."""
        for job_id, j in self.jobs.items():
            for proc in list(j.procs.values()) + [p for p, _ in j.leaving]:
                if proc.exitcode not in (None, 0):
                    self.close()
                    raise RuntimeError(f"testbed: a task of job {job_id!r} failed (exit code {proc.exitcode}); "
                                       "its traceback is above")
            for proc, core in [x for x in j.leaving if x[0].exitcode == 0]:
                j.leaving.remove((proc, core))
                self.load[core] -= 1

    def close(self) -> None:
        """Kill every task still alive (a failed or interrupted run)."""
        for j in self.jobs.values():
            for proc in list(j.procs.values()) + [p for p, _ in j.leaving]:
                if proc.is_alive():
                    proc.kill()
                    proc.join(5)

    # --- internals
    def _launch(self, j: _Job, job_id: str, rank: int, newcomer: bool) -> None:
        from clustersim.simulator.calibration import jobrun
        from clustersim.simulator.calibration.launch import exit_after

        core = min(self.load, key=lambda c: (self.load[c], c))   # the least used core
        self.load[core] += 1
        j.cores[rank] = core
        spec = {**j.spec, "core": core, "commands_seen": j.commands}
        proc = self.ctx.Process(target=exit_after, daemon=True,
                                args=(jobrun.task, job_id, j.gen, rank, j.world, spec, newcomer, self.port, self.timeout))
        proc.start()
        j.procs[rank] = proc

    def _command(self, j: _Job, job_id: str, cmd: dict) -> None:
        j.commands += 1
        self.store.set(f"{job_id}/command/{j.commands}", json.dumps(cmd))
        self.store.add(f"{job_id}/commands", 1)

    def _join(self, j: _Job, procs: dict) -> None:
        deadline = time.monotonic() + self.timeout
        for rank, proc in list(procs.items()):
            proc.join(max(deadline - time.monotonic(), 0.1))
            if proc.exitcode != 0:
                self.close()
                raise RuntimeError(f"testbed: task {rank} of a job failed or hung (exit code {proc.exitcode})")
        self._release(j, procs)

    def _release(self, j: _Job, procs: dict) -> None:
        for rank in procs:
            self.load[j.cores.pop(rank)] -= 1
        procs.clear()

    def _get(self, key: str) -> dict | None:
        if not self.store.check([key]):
            return None
        return json.loads(self.store.get(key).decode())


def _td(seconds: float):
    from datetime import timedelta
    return timedelta(seconds=seconds)


def tasks_of(alloc) -> tuple[int, int]:
    """(tasks, of which parameter servers) of an allocation."""
    counts = task_counts(alloc) if alloc else {}
    return counts.get("worker", 0) + counts.get("ps", 0), counts.get("ps", 0)


class Reported(Progress):
    """A real job's progress: no rate, no phase, no completion to schedule. Its iterations are
    what its rank 0 reports (``TestbedEngine._poll``); it has no simulated throughput samples."""

    def _enter_phase(self, st: JobState, now: float) -> Next:
        st.phases = None
        st.rate = 0.0
        return Next(None, None)


class TestbedEngine(Engine):
    """The engine, its clock the wall clock, its jobs real (see the module's docstring)."""

    def __init__(self, jobs, cluster, policy, tasks: Tasks, mechanism: str, poll_s: float, **kw):
        if mechanism not in MECHANISMS:
            raise ValueError(f"mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
        if not (math.isfinite(poll_s) and poll_s > 0):
            raise ValueError(f"poll_s must be a finite number of seconds > 0, got {poll_s!r}")
        super().__init__(jobs, cluster, policy, **kw)
        self.progress = Reported()
        self.tasks, self.mechanism, self.poll_s = tasks, mechanism, float(poll_s)
        self._start = 0.0                         # time.monotonic() at the run's time 0
        self._actions: list = []
        self._awaiting: dict[str, tuple] = {}     # job -> (event row, decided at (monotonic), gen, kind)

    def run(self):
        self._start = time.monotonic()            # time 0 is now
        self._at(self.poll_s, self._poll_tick)
        try:
            return super().run()
        finally:
            self.tasks.close()

    def _wait_until(self, t: float) -> None:
        """Sleep until ``t`` s of wall time have passed since the start (at once if they have)."""
        delay = self._start + t - time.monotonic()
        if delay > 0:
            time.sleep(delay)

    # --- the real side of the engine's changes
    def _apply(self, changes):
        self._actions = []
        changed = super()._apply(changes)
        decided = time.monotonic()
        stops_first = sorted(self._actions, key=lambda a: 0 if a[1] is Change.STOP else 1)
        for st, change, old, new, row in stops_first:
            self._carry_out(st, change, old, new, row, decided)
        return changed

    def _reconfigure(self, c) -> None:
        old = c.state.allocation
        super()._reconfigure(c)
        self._actions.append((c.state, c.kind, old, c.new, self.recorder.event_rows - 1))

    def _stop(self, st: JobState, change, reason, released: bool = False) -> None:
        old = st.allocation
        super()._stop(st, change, reason, released)
        self._actions.append((st, change, old, EMPTY, None))

    def _carry_out(self, st: JobState, change, old, new, row, decided: float) -> None:
        job, t = st.spec.job_id, self.tasks
        (n_old, p_old), (n_new, p_new) = tasks_of(old), tasks_of(new)
        if change is Change.STOP:
            self._settle(st, stopping=True)           # a start cut short costs the time since its decision
            st.progress = min(t.stop(job), st.spec.total_work)
            return
        if change in (Change.START, Change.RESUME):
            t.start(job, n_new, p_new)
            kind = "first"
        elif self.mechanism == "stop_free" and p_old == p_new:
            t.resize(job, n_new)
            kind = "switch"
        else:                                     # stop-resume; also a change of a PS job's PS count
            self._settle(st, stopping=True)
            st.progress = min(t.stop(job), st.spec.total_work)
            t.start(job, n_new, p_new)
            kind = "first"
        self._awaiting[job] = (row, decided, t.jobs[job].gen, kind)
        st.busy_until = math.inf                  # reconfiguring (JobView) until the new group trains

    def _stop_when_all_ended(self) -> None:
        if self.ended():                          # nothing after the last job's end matters
            self._at(0.0, self._halt, priority=URGENT)

    # --- polling the real jobs
    def _poll_tick(self) -> None:
        """Poll, and poll again ``poll_s`` later while anything may still happen: a job runs, an
        event is queued or a decision is pending (else the loop ends: nothing more can happen)."""
        self._poll()
        if self.running or self._queue or self._decision_at is not None:
            self._at(self.poll_s, self._poll_tick)

    def _poll(self) -> None:
        self.tasks.check()
        now = self.now
        for job in list(self.running):
            st = self.states[job]
            st.advance(now)                       # attained service (the rate is 0: progress comes below)
            rep = self.tasks.progress(job)
            if rep is not None and rep["it"] > st.progress:
                st.progress = min(float(rep["it"]), st.spec.total_work)
                self._moved = True
            self._settle(st)
            if self.tasks.done(job) is not None and job not in self._awaiting:
                self.tasks.finish(job)
                self._finish(st)

    def _settle(self, st: JobState, stopping: bool = False) -> None:
        """The measured cost of the job's last change, once its new generation has trained (or,
        ``stopping``, when it is stopped before: all the time since the decision was lost)."""
        job = st.spec.job_id
        if job not in self._awaiting:
            return
        row, decided, gen, kind = self._awaiting[job]
        first = self.tasks.first(job, gen)
        if first is None:
            if stopping:                          # a start cut short lost it all; a pending switch nothing
                lost = time.monotonic() - decided if kind == "first" else 0.0
            elif self.tasks.done(job) is None:
                return
            else:
                lost = 0.0                        # finished before the switch took place
        elif kind == "first":
            lost = max(first["t"] - decided, 0.0)
        else:
            old = self.tasks.exit_of(job, gen - 1)
            lost = max(first["t"] - old["t_stop"], 0.0) if old else 0.0
        del self._awaiting[job]
        st.busy_until = self.now
        if row is not None and math.isfinite(lost):
            self.recorder.amend_overhead(row, lost)   # the event's own row (recorded at the decision)
        st.overhead_s += lost
        st.overhead_gpu_s += lost * st.gpus
