"""Seed 004's API: codeck's web client and the proactive agents under ``/api/agents``."""
