"""clustersim: replay cluster traces against scheduling policies."""

__version__ = "0.1.0"
