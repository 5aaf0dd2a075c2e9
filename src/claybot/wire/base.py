"""The base of every response model, and the route class that serializes them faithfully.

A route answers with what the layers below it hand over (mostly dicts built for
the wire). Validating those into a model must not change a byte of the answer:

- ``strict``: values are taken as they are; a lax model would turn ``5.0`` into
  ``5`` or ``"5"`` into ``5`` without a word.
- ``extra="allow"``: a field a layer below adds before it is described here still
  reaches the client (the conformance test, which checks every answer against the
  document with no undeclared field allowed, fails until it is described).
- ``exclude_unset`` on every route (``AnswerRoute``): a field the route left out
  stays out, rather than appearing with its default. Such fields are declared
  with ``Omitted`` so the document shows them as optional and never null.

Fields are declared in the order the engine writes them, which is the order the
client has always read.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict
from pydantic.json_schema import SkipJsonSchema

if TYPE_CHECKING:
    from claybot.wire.answer_route import AnswerRoute

__all__ = ["Answer", "AnswerRoute", "Ok", "Omitted", "drop_null_default"]


class Answer(BaseModel):
    model_config = ConfigDict(strict=True, extra="allow")


class Ok(Answer):
    """``{"ok": true}``: what every successful JSON answer starts with."""

    ok: Literal[True]


# A field the engine leaves out rather than sending null: optional, never null.
Omitted = SkipJsonSchema[None]


def drop_null_default(schema: dict[str, Any]) -> None:
    """``json_schema_extra`` for a field left out rather than null: its ``None`` default
    would show as ``"default": null`` in the document, against the field's type."""
    schema.pop("default", None)


def __getattr__(name: str) -> Any:
    """``AnswerRoute`` on first use: it imports FastAPI (about 100 ms), which the CLI,
    reading answers with the models above, never needs (``answer_route.py``)."""
    if name == "AnswerRoute":
        from claybot.wire.answer_route import AnswerRoute

        return AnswerRoute
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
