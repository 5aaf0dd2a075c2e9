"""Home directory, settings.json and auth.json."""
