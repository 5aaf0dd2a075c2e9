"""What an OpenAI client's request says to the agent: pure rules, no I/O.

An OpenAI client resends the whole conversation with every request; in ClayBot the
conversation lives in the agent, which holds everything it was told and answered.
So a request is read for what is new in it:

- **New** are the ``user`` messages after the last ``assistant`` message (all of them
  when there is none). They are said to the agent as one message (joined by a blank
  line), so one request is one turn. Everything before is the agent's already, as it
  holds it: a client that edits or drops earlier messages rewrites nothing in
  ClayBot. ``system`` and ``developer`` messages are ignored (the agent has its own
  system prompt), and so are ``tool`` messages (the agent's tools run in ClayBot).
- **Already held**: a request can repeat a message ClayBot has (a retry after a
  timeout or a dropped connection, a chat UI's "regenerate"). The client's last
  exchange (its user messages before the last assistant message, and that message)
  is looked up among the agent's turns (a turn's replies joined by a blank line, as
  the door answered them); the new messages that equal the messages the agent got
  after that turn, in order, are already held, and the request follows the turn of
  the last of them instead of saying it again. Without an exchange (a
  conversation's first request) nothing can be matched, so a retried first message
  is said again, unless the client sends an ``Idempotency-Key``.
- **Images** in new user messages (``image_url`` parts) come as ``data:`` URLs; the
  door stores them and the message carries them as files. A web address is refused,
  never fetched: the engine makes no request a client chose.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from claybot.api.openai.bodies import ChatMessage
from claybot.kernel.errors import ClayError

OPENAI_CONNECTOR = "openai"  # no connector is loaded under this name: replies go nowhere else
DEFAULT_MODEL = "claybot"
AGENT_MODEL_PREFIX = "agent:"
SOCKET_OWNER = "socket"  # the owner of agents made through the Unix socket (no API key)
DEFAULT_USER = "default"
TURN_SEPARATOR = "\n\n"  # between the replies of one turn, and between new messages
_PLAIN_NAME = re.compile(r"^[^\x00-\x1f/]{1,200}$")


class NoNewMessage(ClayError):
    code = "no_user_message"

    def __init__(self, message: str) -> None:
        super().__init__(message, field="messages")


class UnsupportedContent(ClayError):
    code = "unsupported_content"


class ModelNotFound(ClayError):
    code = "model_not_found"
    status = 404

    def __init__(self, model: str) -> None:
        super().__init__(
            f"The model {model!r} does not exist or you do not have access to it; "
            f"GET /v1/models lists yours ({DEFAULT_MODEL!r}, and 'agent:<agentId>' for "
            "each of your agents)",
            field="model",
        )


def agent_model(agent_id: str) -> str:
    return AGENT_MODEL_PREFIX + agent_id


def named_agent(model: str) -> str | None:
    """The agent id a model name picks (``agent:<id>``); None for the default model.

    Raises ``ModelNotFound`` for any other name.
    """
    if model == DEFAULT_MODEL:
        return None
    if model.startswith(AGENT_MODEL_PREFIX) and len(model) > len(AGENT_MODEL_PREFIX):
        return model[len(AGENT_MODEL_PREFIX) :]
    raise ModelNotFound(model)


def channel_of(user: str | None) -> str:
    """The conversation a request's ``user`` names. A name the agent directory cannot
    hold as it is (a ``/``, a control character, a very long one) is hashed instead."""
    if not user:
        return DEFAULT_USER
    if _PLAIN_NAME.match(user):
        return user
    return "user-" + hashlib.sha256(user.encode()).hexdigest()[:32]


def idempotent_message_id(owner: str, key: str) -> str:
    """The message id of an ``Idempotency-Key``: the same key of the same owner is the
    same message, which the engine accepts once."""
    return "idem-" + hashlib.sha256(f"{owner}\0{key}".encode()).hexdigest()[:40]


@dataclass(frozen=True)
class ImagePart:
    """An image a new user message carries, as the client sent it (still base64)."""

    field: str  # where it is in the body, for errors: messages.2.content.1
    mime_type: str  # what the data URL says; the store sniffs the content itself
    base64: str

    @property
    def name(self) -> str:
        """The name it is stored under (a data URL has none)."""
        subtype = self.mime_type.partition("/")[2] or "bin"
        _, message, _, part = self.field.split(".")
        return f"image-{message}-{part}.{_EXTENSIONS.get(subtype, subtype)}"


_EXTENSIONS = {"jpeg": "jpg", "svg+xml": "svg"}
_DATA_URL = re.compile(r"^data:(?P<mime>[\w.+-]+/[\w.+-]+)?(?:;[^;,]*)*?;base64,", re.IGNORECASE)


def image_part(url: str, field: str) -> ImagePart:
    """An ``image_url`` part's URL, which must be a base64 data URL."""
    found = _DATA_URL.match(url)
    if found is None:
        scheme = url.partition(":")[0].lower() if ":" in url[:12] else ""
        said = (
            "a web address, which the engine does not fetch"
            if scheme in ("http", "https")
            else "not a base64 data URL"
        )
        raise UnsupportedContent(
            f"{field} is {said}; send the image itself as 'data:image/png;base64,...'",
            field=field,
        )
    return ImagePart(field, (found.group("mime") or "").lower(), url[found.end() :])


def message_parts(message: ChatMessage, index: int) -> tuple[str, list[ImagePart]]:
    """What a user message says, as text, and the images it carries; refuses audio and
    files."""
    content = message.content
    if content is None:
        return "", []
    if isinstance(content, str):
        return content, []
    texts: list[str] = []
    images: list[ImagePart] = []
    for number, part in enumerate(content):
        field = f"messages.{index}.content.{number}"
        if part.type == "text" and part.text is not None:
            texts.append(part.text)
        elif part.type == "image_url" and part.image_url is not None:
            images.append(image_part(part.image_url.url, field))
        else:
            raise UnsupportedContent(
                f"messages[{index}] has a {part.type!r} part; agents read text and images "
                "(image_url parts) only",
                field=field,
            )
    return "\n".join(texts), images


def _plain_text(message: ChatMessage) -> str:
    """An assistant message's text, for matching (its non-text parts are skipped)."""
    content = message.content
    if isinstance(content, str):
        return content
    return "\n".join(part.text for part in content or [] if part.text is not None)


@dataclass(frozen=True)
class Exchange:
    """The client's last exchange: what it said (joined as the door says it) and the reply."""

    said: str
    reply: str


@dataclass(frozen=True)
class Request:
    """What a conversation says to the agent now, and the exchange before it."""

    new: list[str]  # the new user messages' texts, in order
    last: Exchange | None  # None when the client shows no reply with a message before it
    # The images each new message carries, by its position in ``new``.
    images: tuple[tuple[ImagePart, ...], ...] = ()

    def images_from(self, start: int) -> list[ImagePart]:
        """The images of the new messages from ``start`` (those not held already)."""
        return [image for carried in self.images[start:] for image in carried]


def read_conversation(messages: Sequence[ChatMessage]) -> Request:
    assistants = [index for index, message in enumerate(messages) if message.role == "assistant"]
    last_assistant = assistants[-1] if assistants else -1
    new: list[str] = []
    images: list[tuple[ImagePart, ...]] = []
    for index in range(last_assistant + 1, len(messages)):
        message = messages[index]
        if message.role == "user":
            text, carried = message_parts(message, index)
            if text.strip() or carried:
                new.append(text)
                images.append(tuple(carried))
    if not new:
        raise NoNewMessage(
            "no user message to send: the agent gets the user messages after the last "
            "assistant message, and there is none with text or an image"
        )
    last = None
    if last_assistant >= 0:
        before = assistants[-2] if len(assistants) > 1 else -1
        prompts = [
            text
            for message in messages[before + 1 : last_assistant]
            if message.role == "user" and (text := _plain_text(message)).strip()
        ]
        if prompts:
            last = Exchange(TURN_SEPARATOR.join(prompts), _plain_text(messages[last_assistant]))
    return Request(new, last, tuple(images))


@dataclass(frozen=True)
class Held:
    count: int  # how many of the request's new messages the agent already holds
    message_id: str | None  # the inbox item of the last of them


NOTHING_HELD = Held(0, None)


def already_held(records: Sequence[Mapping[str, Any]], request: Request) -> Held:
    """Which of the request's new messages the agent holds already (see the module's
    docstring), from its history records (oldest first).

    The client's last exchange is found among the agent's turns: the newest whose
    message and replies are the exchange's (a reply alone is not enough: "OK" answers
    many messages). The messages the agent got after that turn are then compared with
    the request's new ones, in order.
    """
    if request.last is None:
        return NOTHING_HELD
    replies: dict[str, list[str]] = {}  # a turn's delivered texts, by its message id
    said: list[tuple[str, str]] = []  # (message id, text) of what a person said, in order
    for record in records:
        kind = record.get("type")
        message_id = record.get("messageId")
        if not isinstance(message_id, str):
            continue
        if kind == "user_message" and not record.get("origin"):
            said.append((message_id, str(record.get("text", ""))))
        elif kind == "assistant_message" and record.get("outgoingId"):
            replies.setdefault(message_id, []).append(str(record.get("text", "")))
    wanted = request.last.reply.strip()
    anchor = None
    for position in range(len(said) - 1, -1, -1):
        message_id, text = said[position]
        answer = TURN_SEPARATOR.join(replies.get(message_id, []))
        if text == request.last.said and answer.strip() == wanted:
            anchor = position
            break
    if anchor is None:
        return NOTHING_HELD
    count, last = 0, None
    for message_id, text in said[anchor + 1 :]:
        matched = _matching_run(request.new, count, text)
        if matched == 0:
            break
        count += matched
        last = message_id
        if count == len(request.new):
            break
    return Held(count, last)


def _matching_run(new: list[str], start: int, text: str) -> int:
    """How many of ``new`` from ``start``, joined as the door joins them, make ``text``
    (0: none do)."""
    for end in range(start + 1, len(new) + 1):
        joined = TURN_SEPARATOR.join(new[start:end])
        if joined == text:
            return end - start
        if len(joined) >= len(text):
            return 0
    return 0
