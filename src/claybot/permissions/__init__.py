"""Per-agent permissions: tags, grants and path checks (issue 3)."""
