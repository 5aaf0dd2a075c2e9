"""Inference and image providers."""
