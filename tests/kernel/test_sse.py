"""SSE framing: what every stream writes, held to sse-starlette's encoder."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from sse_starlette.event import ServerSentEvent

from claybot.kernel.sse import CRLF, LF, sse_comment, sse_frame


@given(
    data=st.text(alphabet=st.characters(blacklist_categories=["Cs"]) | st.sampled_from("\r\n")),
    event=st.none() | st.sampled_from(["message", "log", "end"]),
    event_id=st.none() | st.integers(0, 2**63 - 1),
    eol=st.sampled_from([CRLF, LF]),
)
def test_a_frame_is_what_sse_starlette_writes(
    data: str, event: str | None, event_id: int | None, eol: bytes
) -> None:
    """Also for data with line breaks: each line becomes a data field of its own."""
    their_id = None if event_id is None else str(event_id)
    theirs = ServerSentEvent(data=data, event=event, id=their_id, sep=eol.decode())
    assert sse_frame(data.encode(), event=event, id=event_id, eol=eol) == theirs.encode()


def test_the_wire_formats_clients_depend_on() -> None:
    assert sse_frame(b"[DONE]", eol=LF) == b"data: [DONE]\n\n"  # OpenAI's end of stream
    assert sse_frame(b"{}", event="message", id=7) == b"id: 7\r\nevent: message\r\ndata: {}\r\n\r\n"
    assert sse_frame(b"a\r\nb", eol=LF) == b"data: a\ndata: b\n\n"
    assert sse_comment("ping") == b": ping\r\n\r\n"
    assert sse_comment("ping", eol=LF) == ServerSentEvent(comment="ping", sep="\n").encode()
