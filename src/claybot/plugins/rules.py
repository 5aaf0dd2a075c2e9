"""Pure rules for plugin instances: ids, defaults, exclusivity. No I/O."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from claybot.plugin_api.errors import ExclusivePluginConflict, InvalidInstanceId

# Kept equal to PluginInstanceSettings.instance_id, so an id accepted here can be saved.
INSTANCE_ID_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
INSTANCE_ID_MAX_LENGTH = 64


@dataclass(frozen=True)
class RunningInstance:
    instance_id: str
    plugin_id: str
    exclusive: bool


# Connector names the engine itself answers for; an instance with one of these ids
# would receive (and answer) another connector's conversations.
RESERVED_INSTANCE_IDS = frozenset({"local", "webchat"})


def check_instance_id(instance_id: str) -> None:
    if not instance_id:
        raise InvalidInstanceId(instance_id, "must not be empty")
    if instance_id in RESERVED_INSTANCE_IDS:
        raise InvalidInstanceId(instance_id, "is reserved for a built-in connector")
    if len(instance_id) > INSTANCE_ID_MAX_LENGTH:
        raise InvalidInstanceId(instance_id, f"must be at most {INSTANCE_ID_MAX_LENGTH} characters")
    if not INSTANCE_ID_PATTERN.match(instance_id):
        raise InvalidInstanceId(
            instance_id, "use letters, digits, '.', '_' or '-', starting with a letter or digit"
        )


def default_instance_id(plugin_id: str, is_free: Callable[[str], bool]) -> str:
    """``pluginId``, then ``pluginId-2``, ``pluginId-3``... the first that is free."""
    if is_free(plugin_id):
        return plugin_id
    number = 2
    while not is_free(f"{plugin_id}-{number}"):
        number += 1
    return f"{plugin_id}-{number}"


def check_exclusive(plugin_id: str, exclusive: bool, running: Iterable[RunningInstance]) -> None:
    """An exclusive plugin runs alone: nothing else beside it, and it beside nothing else."""
    others = list(running)
    for other in others:
        if other.exclusive:
            raise ExclusivePluginConflict(
                f"plugin {other.plugin_id!r} (instance {other.instance_id!r}) is exclusive; "
                f"unload it before loading {plugin_id!r}"
            )
    if exclusive and others:
        names = ", ".join(repr(other.instance_id) for other in others)
        raise ExclusivePluginConflict(
            f"plugin {plugin_id!r} is exclusive and other plugin instances are loaded "
            f"({names}); unload them first"
        )
