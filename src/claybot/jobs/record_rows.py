"""A job's records as rows of ``job_records``: the stores' edge between the agents'
typed history records and the JSON column that holds them.

Above the stores a record is a ``HistoryRecord``; a row holds its JSON, built by
msgspec as a line of history.jsonl is, so a row reads as it always did. The stores
compare these JSON forms, not the structs, to tell a checkpoint sent again (the same
JSON under its numbers) from another writer's records.

A row that is no record of a known type (written by a newer engine, or by hand)
reads as a ``DamagedRecord`` in its place: the transcript leaves it out of what the
model sees, and the records after it keep their numbers.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, TypedDict

import msgspec

from claybot.agents.history import DAMAGED_RAW_CHARS
from claybot.agents.records import DamagedRecord, HistoryRecord, parse_record


class RecordRow(TypedDict):
    """A ``job_records`` row as its insert binds it."""

    job_id: str
    seq: int
    # The record's JSON object, as the JSON column binds it (and a row read back is
    # compared with it).
    record: dict[str, Any]


def record_rows(job_id: str, first_seq: int, records: Sequence[HistoryRecord]) -> list[RecordRow]:
    """The rows of ``records``, numbered from ``first_seq``."""
    return [
        RecordRow(job_id=job_id, seq=first_seq + n, record=msgspec.to_builtins(record))
        for n, record in enumerate(records)
    ]


def record_of_row(seq: int, row: Mapping[str, Any]) -> HistoryRecord:
    """The typed record a row holds; a ``DamagedRecord`` (``line``: the row's number)
    when it is no record of a known type."""
    record = parse_record(row)
    if record is not None:
        return record
    raw = msgspec.json.encode(row).decode()[:DAMAGED_RAW_CHARS]
    return DamagedRecord(
        line=seq,
        raw=raw,
        error=f"row {seq} of the job's records is no record of a known type; it is left "
        "as it is and the model does not see it",
    )
