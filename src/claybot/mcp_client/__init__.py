"""A client of Model Context Protocol servers, for the mcp plugin and for jobs.

Importing this package imports the MCP SDK (most of a second): import it where a
server is actually used, never at start-up.
"""
