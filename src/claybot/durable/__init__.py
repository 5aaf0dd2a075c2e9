"""Crash-safe file primitives: atomic replacement, append-only JSONL, group commit."""
