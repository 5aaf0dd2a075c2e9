"""The history page's models mirror the records the runtime writes, field for field.

The records are msgspec structs (``agents/records.py``); the API's page answers them
with pydantic models (``wire/history.py``) that make its OpenAPI schema. Neither can
gain, lose, reorder or loosen a field alone.
"""

from __future__ import annotations

from typing import Any

import msgspec
import pytest
from pydantic import BaseModel

from claybot.agents import records
from claybot.wire import history as wire

MIRRORS: list[tuple[type[msgspec.Struct], type[BaseModel]]] = [
    (records.StartRecord, wire.StartRecord),
    (records.ResetRecord, wire.ResetRecord),
    (records.UserMessageRecord, wire.UserMessageRecord),
    (records.AssistantMessageRecord, wire.AssistantMessageRecord),
    (records.ToolResultRecord, wire.ToolResultRecord),
    (records.NoteRecord, wire.NoteRecord),
    (records.DamagedRecord, wire.DamagedRecord),
    (records.ToolOutput, wire.ToolResultOutput),  # the output, with what the page adds
    (records.TokenUsageRecord, wire.TokenUsageRecord),
    (records.TokenCounts, wire.TokenCounts),
]


def struct_fields(struct: type[msgspec.Struct]) -> list[tuple[str, bool]]:
    """(name as written, required) of each field, ``type`` first for a record."""
    tag = struct.__struct_config__.tag_field
    fields = [(tag, True)] if tag else []
    for info in msgspec.structs.fields(struct):
        required = info.default is msgspec.NODEFAULT and info.default_factory is msgspec.NODEFAULT
        fields.append((info.encode_name, required))
    return fields


def model_fields(model: type[BaseModel]) -> list[tuple[str, bool]]:
    return [(name, info.is_required()) for name, info in model.model_fields.items()]


@pytest.mark.parametrize(("struct", "model"), MIRRORS)
def test_each_page_model_mirrors_its_record(
    struct: type[msgspec.Struct], model: type[BaseModel]
) -> None:
    mirrored = model_fields(model)
    if issubclass(model, wire.Numbered):
        assert mirrored[0] == ("seq", True)  # the record's number, first on a page
        mirrored = mirrored[1:]
    if model is wire.ToolResultOutput:
        mirrored = mirrored[:2]  # then toolMessage and files, for the original dashboard
    assert mirrored == struct_fields(struct)


def test_every_record_type_has_a_mirror() -> None:
    assert set(records.RECORD_TYPES) <= {struct for struct, _ in MIRRORS}


def test_a_record_written_is_a_valid_page_record() -> None:
    """What the builders write passes the page's strict models as it is."""
    from claybot.agents.history import assistant_message_record
    from claybot.providers.base import TokenUsage, ToolCall

    record = assistant_message_record(
        1, "hi", "m1", tool_calls=[ToolCall("c1", "t", {"a": 1})], usage=TokenUsage(1, 2),
        provider="p", model="x", final=True, outgoing_id="m1#0", error=True,
    )  # fmt: skip
    data: dict[str, Any] = {"seq": 0, **msgspec.to_builtins(record)}
    page = wire.AssistantMessageRecord.model_validate(data)
    assert page.model_dump(exclude_unset=True) == data


def test_a_tool_call_is_mirrored_too() -> None:
    from claybot.providers.base import ToolCall

    call = ToolCall("c1", "t", {"a": [1]})
    written = msgspec.json.decode(msgspec.json.encode(call))
    assert list(written) == list(wire.ToolCallRecord.model_fields)
    assert wire.ToolCallRecord.model_validate(written).model_dump() == written
