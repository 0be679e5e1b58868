"""asv benchmarks of clustersim's small cases (asv.conf.json at the repository root; docs/performance.md)."""
