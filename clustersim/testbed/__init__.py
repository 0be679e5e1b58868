"""``clustersim-testbed``: the simulator checked against real training on this host.

- ``trace.py``: the small seeded trace the testbed replays (a canonical job table);
- ``real.py``: ``TestbedEngine``, the simulator's own engine with the wall clock for its clock and
  real ``torch.distributed`` jobs (``simulator/calibration/jobrun.py``) for its speed model: the
  policy decides through the same ``decide(view)`` contract, and the same ``Recorder`` writes
  ``jobs.parquet``, ``events.parquet``, ``timeline.parquet`` and ``summary.json``;
- ``compare.py``: per-job JCT error, mean-JCT and makespan error, and the host's own noise;
- ``cli.py``: the command: calibrate, run for real, simulate, compare, plot (``plot.py``).

docs/testbed.md is the guide and holds the measured error table.
"""
