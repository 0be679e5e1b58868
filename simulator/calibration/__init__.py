"""Real-hardware calibration: measure a model's speed, convergence and rescaling costs with
``torch.distributed``, fit the simulator's models to the measurements and write a profile.

``clustersim-calibrate`` (``cli.py``, Hydra config ``configs/calibrate/``) runs the sweeps:
- ``dataparallel.py``: N data-parallel workers (NCCL on GPUs, gloo on CPU), per-worker batch;
- ``ps.py``: p parameter servers holding parameter shards and w workers (sync or async);
- ``rescale.py``: a stop-resume and a stop-free rescale from n to n' workers;
- ``converge.py``: loss per epoch of a run to convergence;
then ``fit.py`` fits ``OptimusSpeed``, ``AllReduceSpeed``, ``LossFitter`` and ``ModelCosts``
(simulator/speed.py, convergence.py, overhead.py), ``write.py`` writes the profile YAML and a
``profile`` group config, ``plot.py`` the PNG. Every measured point goes to a JSON-lines file
as it is measured (``store.py``), so a killed calibration resumes where it stopped.

torch is an optional extra (``pip install clustersim[calibrate]``): only the measuring modules
import it; fitting, writing and plotting work without it. docs/calibration.md has the guide.
"""

from __future__ import annotations

INSTALL_HINT = 'the calibration needs torch: pip install "clustersim[calibrate]" (torch==2.13.0)'


def have_torch() -> bool:
    try:
        import torch  # noqa: F401
        import torch.distributed  # noqa: F401
    except ImportError:
        return False
    return True
