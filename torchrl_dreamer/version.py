"""Package version (single source of truth, read by setup.cfg)."""

__version__ = "0.1.0"
