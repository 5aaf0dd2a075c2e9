"""Tools agents can call."""
