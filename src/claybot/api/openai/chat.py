"""What the OpenAI-compatible door does with the agents: which agent a model names for
a caller, what of a conversation the agent holds already, saying what is new, and the
agents a caller may use as models.

The routes (``routes.py``) read the request and shape the answer; this is built for
each request from the engine's services (``api/deps.py``), so it holds no state of
its own. The rules it applies are pure and live beside it (``conversation.py``), as
does the turn it hands back (``turn.py``).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from claybot.agents.descriptors import UserDescriptor
from claybot.agents.durable_port import IndexEntry
from claybot.agents.system import AgentSystem
from claybot.api.openai.conversation import (
    NOTHING_HELD,
    OPENAI_CONNECTOR,
    SOCKET_OWNER,
    TURN_SEPARATOR,
    ModelNotFound,
    Request,
    already_held,
    channel_of,
    idempotent_message_id,
    named_agent,
)
from claybot.api.openai.images import store_images
from claybot.api.openai.turn import HISTORY_LIMIT, ChatTurn, TurnWatch
from claybot.connectors.base import InboundMessage
from claybot.engine.configuration import LiveConfiguration
from claybot.files.store import FileStore
from claybot.kernel.events import EventBus
from claybot.kernel.ids import new_id


@dataclass(frozen=True)
class Caller:
    """Who is asking: an API key's id (TCP), or ``SOCKET_OWNER`` on the Unix socket;
    ``sees_all``: the owner and admin keys may talk to every agent of this door."""

    owner: str
    sees_all: bool

    @classmethod
    def of(cls, key_id: str | None, scopes: tuple[str, ...] | list[str]) -> Caller:
        if key_id is None:
            return cls(SOCKET_OWNER, True)
        return cls(key_id, "admin" in scopes)

    def may_talk_to(self, descriptor: object) -> bool:
        return (
            isinstance(descriptor, UserDescriptor)
            and descriptor.connector == OPENAI_CONNECTOR
            and (self.sees_all or descriptor.userId == self.owner)
        )


class OpenAiChat:
    def __init__(
        self,
        agents: AgentSystem,
        events: EventBus,
        files: FileStore,
        configuration: LiveConfiguration,
    ) -> None:
        self._agents = agents
        self._events = events
        self._files = files
        self._configuration = configuration

    @property
    def reply_timeout_s(self) -> float:
        """How long a request waits for its turn (settings: ``chat.replyTimeoutS``)."""
        return self._configuration.settings.chat.reply_timeout_s

    def agent_of(self, caller: Caller, model: str) -> IndexEntry:
        """The agent ``agent:<id>`` names, if this caller may talk to it (else
        ModelNotFound: another's agent is as unknown as a missing one)."""
        agent_id = named_agent(model)
        assert agent_id is not None
        if not self._agents.exists(agent_id):
            raise ModelNotFound(model)
        entry = self._agents.directory.entry(agent_id)
        if not caller.may_talk_to(entry.descriptor):
            raise ModelNotFound(model)
        return entry

    def models(self, caller: Caller) -> Iterator[IndexEntry]:
        """The agents of this door the caller may talk to."""
        for entry in self._agents.listings.conversations(OPENAI_CONNECTOR):
            if caller.may_talk_to(entry.descriptor):
                yield entry

    async def turn(
        self,
        caller: Caller,
        said: Request,
        *,
        model: str,
        user: str | None,
        idempotency_key: str | None,
        live: bool,
    ) -> ChatTurn:
        """The turn that answers ``said``: the one the agent held already when every new
        message is one it heard, else a new one for what it has not heard (``live``:
        followed as it goes, for a stream)."""
        agent_id, descriptor = self._conversation(caller, model, user)
        held = NOTHING_HELD
        if agent_id is not None and said.last is not None:
            page = await self._agents.histories.page(
                agent_id, after=None, before=None, limit=HISTORY_LIMIT
            )
            held = already_held(page.records, said)
        if agent_id is not None and held.message_id is not None and held.count == len(said.new):
            turn = self._agents.turn(agent_id, held.message_id)
            return ChatTurn(self._agents, turn, model=model, new_message=False, watch=None)
        message = InboundMessage(
            OPENAI_CONNECTOR,
            descriptor.userId,
            descriptor.channelId,
            TURN_SEPARATOR.join(said.new[held.count :]),
            idempotent_message_id(caller.owner, idempotency_key) if idempotency_key else new_id(),
            files=await store_images(self._files, said.images_from(held.count)),
        )
        return await self._say(message, model=model, live=live)

    def _conversation(
        self, caller: Caller, model: str, user: str | None
    ) -> tuple[str | None, UserDescriptor]:
        """The agent the model names (None: the caller's own, not made yet) and its
        descriptor."""
        if named_agent(model) is None:
            descriptor = UserDescriptor(
                connector=OPENAI_CONNECTOR, userId=caller.owner, channelId=channel_of(user)
            )
            return self._agents.agent_id_for(descriptor), descriptor
        entry = self.agent_of(caller, model)
        assert isinstance(entry.descriptor, UserDescriptor)
        return entry.agent_id, entry.descriptor

    async def _say(self, message: InboundMessage, *, model: str, live: bool) -> ChatTurn:
        """Post the message as a connector does (durable when this returns) and follow its
        turn; ``live``: watch its events too, from before it is posted (a fast turn's
        first events come before the post returns)."""
        assert message.message_id is not None
        watch = TurnWatch(self._events, message.message_id) if live else None
        try:
            turn = await self._agents.submit_inbound(message)
        except BaseException:
            if watch is not None:
                watch.close()
            raise
        if turn.duplicate and watch is not None:
            watch.close()  # posted before (an Idempotency-Key seen again): follow that turn
            watch = None
        return ChatTurn(
            self._agents, turn, model=model, new_message=not turn.duplicate, watch=watch
        )
