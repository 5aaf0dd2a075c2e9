"""Assembling the doors into one ASGI application, and serving it on the socket and TCP."""
