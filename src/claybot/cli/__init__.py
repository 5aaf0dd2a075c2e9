"""The ``claybot`` command line (typer + rich); it reaches the engine through the socket."""
