"""What the engine keeps after work is done stays bounded (RSS itself: bench/agents.py --memory)."""

from __future__ import annotations

from claybot.agents.agent import TurnOutcome
from claybot.config.settings import ProviderSettings
from claybot.connectors.base import InboundMessage
from claybot.engine.engine import Engine
from claybot.providers.base import ChatMessage, InferenceRequest
from claybot.providers.scripted import REQUESTS_KEPT, ScriptedProvider


async def test_an_outcome_is_kept_for_what_a_scheduler_waits_on_only(engine: Engine) -> None:
    agents = engine.agents
    posted = await agents.post_message(InboundMessage("local", "u1", "c1", "hello", "m1"))
    # A connector's message: its reply went out; nothing of it is kept to wait on.
    assert await agents.wait_processed(posted.agent_id, posted.message_id) is None
    item = await agents.post_to_agent(posted.agent_id, "run the report", origin="cron")
    assert item is not None
    outcome = await agents.wait_processed(posted.agent_id, item.id)
    assert isinstance(outcome, TurnOutcome) and "run the report" in outcome.text
    # Asked again after it finished (a scheduler that was busy): still there.
    assert await agents.wait_processed(posted.agent_id, item.id) == outcome


async def test_the_scripted_provider_keeps_only_its_recent_requests() -> None:
    provider = ScriptedProvider(ProviderSettings(id="scripted", model="echo"))
    requests = [InferenceRequest([ChatMessage("user", f"n{n}")]) for n in range(REQUESTS_KEPT + 5)]
    for request in requests:
        await provider.complete(request)
    assert provider.requests == requests[-REQUESTS_KEPT:]
