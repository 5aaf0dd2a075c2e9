"""What the OpenAPI document cannot learn from the route signatures alone.

- FastAPI adds a 422 answer shaped ``{"detail": [...]}`` to any route with a
  parameter; this API never answers that (its 422 is the error body, declared by the
  routes that can answer it), so those are removed.
"""

from __future__ import annotations

import copy
from typing import Any

from fastapi import FastAPI

Document = dict[str, Any]

SCHEMAS_REF = "#/components/schemas/"


def _without_fastapi_422(document: Document) -> None:
    for path in document.get("paths", {}).values():
        for operation in path.values():
            responses = operation.get("responses", {})
            content = responses.get("422", {}).get("content", {})
            schema = content.get("application/json", {}).get("schema", {})
            if schema == {"$ref": SCHEMAS_REF + "HTTPValidationError"}:
                del responses["422"]
    schemas = document["components"]["schemas"]
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)


def refine(document: Document) -> Document:
    """The generated document, corrected."""
    refined = copy.deepcopy(document)
    _without_fastapi_422(refined)
    return refined


def install(app: FastAPI) -> None:
    """Serve the refined document."""
    generate = app.openapi  # FastAPI's, which caches what it generates
    built: list[Document] = []

    def openapi() -> Document:
        if not built:
            built.append(refine(generate()))
        return built[0]

    app.openapi = openapi  # type: ignore[method-assign]
