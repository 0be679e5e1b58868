"""An example clustersim plug-in: the ``ljf`` policy (``policy.py``), the ``sacct`` trace format
(``sacct.py``) and their configs (``configs/``), all found through entry points
(``pyproject.toml``). Importing the package imports nothing else: ``clustersim --help`` reads
the configs without loading the simulator."""
