"""The engine API (seed 000): status, agents, messages, plugins, schedules, files, events."""
