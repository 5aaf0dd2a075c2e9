"""Background agents (subagents): how deep they may nest, how many may work at once,
and how a result reads when it reaches the parent."""

from __future__ import annotations

from dataclasses import dataclass

from claybot.agents.turn import TurnOutcome


class SubagentLimit(ValueError):
    """Starting another background agent would pass a nesting or children limit."""


@dataclass(frozen=True)
class SubagentLimits:
    max_depth: int = 3  # a user agent's subagent is depth 1
    max_busy_children: int = 8  # children with unfinished work, per parent

    def check(self, depth: int, busy_children: int) -> None:
        """Raise ``SubagentLimit``, in words the model can act on, if one is passed."""
        if depth > self.max_depth:
            raise SubagentLimit(
                f"background agents may nest {self.max_depth} deep; this one would be "
                f"at depth {depth}. Do the work here or report back to your parent instead."
            )
        if busy_children >= self.max_busy_children:
            raise SubagentLimit(
                f"this agent already has {busy_children} background agents at work (the "
                f"limit is {self.max_busy_children}); wait for one to report back first."
            )


def result_notice(name: str, agent_id: str, outcome: TurnOutcome) -> str:
    """What the parent reads when a subagent's turn ends."""
    who = f'Background agent "{name}" ({agent_id})'
    if outcome.failed:
        return f"{who} failed: {outcome.text}"
    return f"{who} finished:\n{outcome.text or '(no answer)'}"
