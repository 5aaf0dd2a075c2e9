"""What the OpenAPI document cannot learn from the route signatures alone.

- Provider types are a registry that plugins add to while the engine runs, so the
  ``type`` a provider may name (or its ``id``, which ``type`` defaults to) is listed
  when the document is asked for, not when the module is imported.
- FastAPI adds a 422 answer shaped ``{"detail": [...]}`` to any route with a
  parameter; this API never answers that (its 422 is the error body, declared by the
  routes that can answer it), so those are removed.
- Any route that writes (POST, PUT, DELETE) can meet a full disk (507) or a failed
  write (503): the error handlers answer those for every route, so they are added to
  every such operation here rather than to each route by hand (in the path's shape).
- The routes name their error bodies by ``$ref`` (see ``responses.py``), so the
  error models are added to the components here.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterable
from typing import Any

from fastapi import FastAPI

from claybot.api.codeck_errors import is_codeck_path
from claybot.api.responses import (
    DESCRIPTIONS,
    ERROR_MODELS,
    RETRY_AFTER,
    SCHEMAS_REF,
    WRITE_ERRORS,
)

Document = dict[str, Any]


def _provider_types(schemas: dict[str, Any], types: list[str]) -> None:
    provider = schemas["UpsertProvider"]
    provider["properties"]["type"]["description"] = (
        "The provider implementation, one of `types` in GET /v1/engine/providers; "
        "without it, the id names the type"
    )
    provider["anyOf"] = [
        {"required": ["type"], "properties": {"type": {"enum": types}}},
        {"properties": {"id": {"enum": types}, "type": {"type": "null"}}},
    ]


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


def _error_models(schemas: dict[str, Any]) -> None:
    for model in ERROR_MODELS:
        schema = model.model_json_schema(ref_template=SCHEMAS_REF + "{model}", mode="serialization")
        for name, nested in schema.pop("$defs", {}).items():
            schemas.setdefault(name, nested)
        schemas.setdefault(model.__name__, schema)


def _write_errors(document: Document) -> None:
    for path, operations in document.get("paths", {}).items():
        # The engine's error body, or codeck's on the paths its client calls.
        model = "CodeckError" if is_codeck_path(path) else "ErrorBody"
        body = {"application/json": {"schema": {"$ref": SCHEMAS_REF + model}}}
        for method, operation in operations.items():
            if method not in ("post", "put", "delete"):
                continue
            responses = operation.setdefault("responses", {})
            for status in WRITE_ERRORS:
                responses.setdefault(
                    str(status),
                    {"description": DESCRIPTIONS[status], "headers": RETRY_AFTER, "content": body},
                )


def refine(document: Document, provider_types: Iterable[str]) -> Document:
    """The generated document with what only the running engine knows."""
    refined = copy.deepcopy(document)
    schemas = refined["components"]["schemas"]
    _provider_types(schemas, sorted(provider_types))
    _error_models(schemas)
    _without_fastapi_422(refined)
    _write_errors(refined)
    return refined


def install(app: FastAPI, provider_types: Callable[[], Iterable[str]]) -> None:
    """Serve the refined document; it is built again when the provider types change."""
    generate = app.openapi  # FastAPI's, which caches the generated part
    built: dict[tuple[str, ...], Document] = {}

    def openapi() -> Document:
        types = tuple(sorted(provider_types()))
        if types not in built:
            built.clear()
            built[types] = refine(generate(), types)
        return built[types]

    app.openapi = openapi  # type: ignore[method-assign]
