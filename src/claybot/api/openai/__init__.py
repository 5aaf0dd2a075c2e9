"""The OpenAI-compatible door: ``/v1/chat/completions`` and ``/v1/models``."""
