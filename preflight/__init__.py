"""preflight: check a cluster before a multi-node training run."""

__version__ = "0.1.0"
