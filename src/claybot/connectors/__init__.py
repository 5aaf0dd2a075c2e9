"""Connectors: how people reach agents (local CLI, webchat, Telegram)."""
