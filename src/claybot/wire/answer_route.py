"""The route class every door's router uses: it serializes answers faithfully.

Apart from the models (``base.py``) because it needs FastAPI, which takes about
100 ms to import: the CLI reads answers with the models and never serves a route.
"""

from __future__ import annotations

from typing import Any

from fastapi.routing import APIRoute


class AnswerRoute(APIRoute):
    """Every route serializes its answer leaving out what the route left out."""

    def __init__(self, path: str, endpoint: Any, **kwargs: Any) -> None:
        kwargs["response_model_exclude_unset"] = True
        super().__init__(path, endpoint, **kwargs)
