"""Each plugin instance with its state, as a person managing plugins reads it: the
instances settings.json lists (loaded, failed, waiting or unloaded), and any loaded
one it does not list, with what can be done to each."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

InstanceStateName = Literal["loaded", "failed", "enabled, not loaded", "unloaded"]


@dataclass(frozen=True)
class InstanceState:
    id: str
    pluginId: str
    name: str
    state: InstanceStateName
    problem: str  # why it failed to load ("" unless failed)
    settings: str  # its saved settings as JSON, secrets redacted ("" for the defaults)
    can_unload: bool
    can_load: bool  # an unloaded instance whose plugin is installed: load it again


def states_of(listing: Mapping[str, Any]) -> list[InstanceState]:
    """The states, from the plugin manager's ``listing()``: settings.json's order, then
    the loaded instances it does not list."""
    loaded = {item["id"]: item for item in listing["loaded"]}
    failures = {item["id"]: item for item in listing["failures"]}
    names = {item["id"]: item["name"] for item in listing["catalog"]}
    states: list[InstanceState] = []
    for entry in listing["configured"]:
        instance_id = entry["instanceId"]
        failure = failures.get(instance_id)
        state: InstanceStateName
        if instance_id in loaded:
            state = "loaded"
        elif failure is not None:
            state = "failed"
        else:
            state = "enabled, not loaded" if entry["enabled"] else "unloaded"
        states.append(
            InstanceState(
                id=instance_id,
                pluginId=entry["pluginId"],
                name=names.get(entry["pluginId"], entry["pluginId"]),
                state=state,
                problem=failure["message"] if failure else "",
                settings=json.dumps(entry["settings"]) if entry["settings"] else "",
                can_unload=instance_id in loaded or (failure is not None and entry["enabled"]),
                can_load=not entry["enabled"] and entry["pluginId"] in names,
            )
        )
    configured = {state.id for state in states}
    states += [
        InstanceState(id=item["id"], pluginId=item["pluginId"], name=item["name"],
                      state="loaded", problem="", settings="", can_unload=True, can_load=False)
        for item in listing["loaded"]
        if item["id"] not in configured
    ]  # fmt: skip
    return states
