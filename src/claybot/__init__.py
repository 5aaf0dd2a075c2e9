"""ClayBot: a self-hosted agent engine."""

__version__ = "0.1.0"
