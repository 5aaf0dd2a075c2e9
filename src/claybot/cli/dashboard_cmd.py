"""``claybot dashboard``: a one-time link that logs a browser in to the dashboard."""

from __future__ import annotations

import contextlib
import webbrowser
from typing import Annotated

import typer
from rich.markup import escape

from claybot.cli.common import HomeOption, JsonOption, console, print_json, running_engine


def dashboard(
    home: HomeOption = None,
    no_open: Annotated[
        bool, typer.Option("--no-open", help="Only print the link; do not open a browser.")
    ] = False,
    as_json: JsonOption = False,
) -> None:
    """Log a browser in to the engine's dashboard with a link that works once, for 5 minutes.

    The link opens a session in that browser (a cookie no script can read); run the
    command again for another browser. `claybot dashboard --no-open` on a machine
    without one, then open the link where the engine's port is reachable.
    """
    with running_engine(home) as client:
        link = client.dashboard_link()
    if as_json:
        print_json(link)
        return
    url = link.url
    minutes = link.expiresInS // 60
    console.print(f"Dashboard login link (works once, for {minutes} minutes):")
    console.print(escape(url), soft_wrap=True, highlight=False)
    if not no_open:
        with contextlib.suppress(webbrowser.Error):
            if webbrowser.open(url):
                console.print("Opened in your browser.")
