"""Agents: descriptors, durable inboxes, history, and the system that runs them."""
