"""Seed 002's job API under ``/api/v1``: jobs, their admin, and the MCP server registry."""
