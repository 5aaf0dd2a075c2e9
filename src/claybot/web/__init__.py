"""The dashboard: the engine in a browser, served on its TCP listener at ``/``."""
