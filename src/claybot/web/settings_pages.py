"""The dashboard's Settings pages: plugins (load with a form made from the plugin's
settings model, unload) and the engine log's tail. Providers and credentials are
``provider_pages``, API keys ``key_pages``; they share the sub-navigation.

Everything goes through the engine's own services: the plugin manager's instance
states, ``configuration.load_plugin`` (which validates the settings, loads, then saves) and
``unload_plugin``.
"""

from __future__ import annotations

import asyncio
from typing import Annotated, Literal

from fastapi import APIRouter, Form, Query, Request
from fastapi.responses import Response

from claybot.api.dashboard_auth import Session
from claybot.api.deps import ConfigurationDep, HomePathsDep, PluginsDep
from claybot.kernel.errors import ClayError
from claybot.plugins import PluginManager
from claybot.web.log_tail import SHOWN_LINES, read_tail
from claybot.web.provider_pages import router as provider_pages
from claybot.web.rendering import page, see_other
from claybot.web.routes import guard, guard_form
from claybot.web.settings_form import (
    FIELD_PREFIX,
    fields_of,
    initial_values,
    submitted_values,
    values_of,
)

router = APIRouter(include_in_schema=False)
router.include_router(provider_pages)

LOG_LEVELS = ("debug", "info", "warning", "error")


# -- plugins ---------------------------------------------------------------------------------


@router.get("/settings")
async def plugins(request: Request, manager: PluginsDep) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    return _plugins_page(request, manager, session)


def _plugins_page(
    request: Request,
    manager: PluginManager,
    session: Session,
    status_code: int = 200,
    problem: str = "",
) -> Response:
    return page(
        request,
        "settings_plugins.html",
        status_code=status_code,
        session=session,
        instances=manager.instance_states(),
        catalog=manager.catalog.describe(),
        problem=problem,
    )


def _load_form(
    request: Request,
    manager: PluginManager,
    session: Session,
    plugin_id: str,
    status_code: int = 200,
    values: dict[str, str] | None = None,
    instance_id: str = "",
    problem: str = "",
    problem_field: str = "",
) -> Response:
    definition = manager.catalog.get(plugin_id)
    if definition is None:
        return page(request, "not_found.html", status_code=404, session=session, what=plugin_id)
    fields = fields_of(definition.settings_model)
    return page(
        request,
        "settings_plugin_load.html",
        status_code=status_code,
        session=session,
        plugin=definition,
        fields=fields,
        values=initial_values(fields) if values is None else values,
        instance_id=instance_id,
        problem=problem,
        problem_field=problem_field,
    )


@router.get("/settings/plugins/{plugin_id}")
async def load_form(request: Request, manager: PluginsDep, plugin_id: str) -> Response:
    session = await guard(request)
    if isinstance(session, Response):
        return session
    return _load_form(request, manager, session, plugin_id)


@router.post("/settings/plugins/{plugin_id}")
async def load_plugin(
    request: Request, manager: PluginsDep, configuration: ConfigurationDep, plugin_id: str
) -> Response:
    """Load an instance with the form's settings, typed by the plugin's model; the
    engine validates them. A refusal shows the form again with what was typed."""
    form = {key: value for key, value in (await request.form()).multi_items()
            if isinstance(value, str)}  # fmt: skip
    session = await guard_form(request, form.get("csrf"))
    if isinstance(session, Response):
        return session
    definition = manager.catalog.get(plugin_id)
    if definition is None:
        return page(request, "not_found.html", status_code=404, session=session, what=plugin_id)
    fields = fields_of(definition.settings_model)
    instance_id = form.get("instanceId", "").strip()
    kept = submitted_values(fields, form)
    settings, problems = values_of(fields, form)
    if problems:
        return _load_form(request, manager, session, plugin_id, 422, kept, instance_id,
                          "; ".join(p.message for p in problems),
                          FIELD_PREFIX + problems[0].field)  # fmt: skip
    try:
        await configuration.load_plugin(plugin_id, instance_id or None, settings)
    except ClayError as exc:
        # A bad form (settings, instance id) is 422; a conflict or a plugin that cannot
        # start keeps the engine's own status.
        status = 422 if exc.status == 400 else exc.status
        where = (exc.field or "").replace("settings.", FIELD_PREFIX, 1)
        return _load_form(request, manager, session, plugin_id, status, kept, instance_id,
                          exc.message, where)  # fmt: skip
    return see_other("/settings")


@router.post("/settings/instances/{instance_id}/{verb}")
async def instance_action(
    request: Request,
    manager: PluginsDep,
    configuration: ConfigurationDep,
    instance_id: str,
    verb: Literal["load", "unload"],
    csrf: Annotated[str | None, Form(max_length=200)] = None,
) -> Response:
    session = await guard_form(request, csrf)
    if isinstance(session, Response):
        return session
    try:
        if verb == "unload":
            await configuration.unload_plugin(instance_id)
        else:  # an unloaded instance, again with the settings it was saved with
            entry = next((e for e in manager.configured() if e["instanceId"] == instance_id), None)
            if entry is None:
                problem = f"No plugin instance {instance_id}."
                return _plugins_page(request, manager, session, 404, problem)
            await configuration.load_plugin(entry["pluginId"], instance_id, None)
    except ClayError as exc:
        return _plugins_page(request, manager, session, exc.status, exc.message)
    return see_other("/settings")


# -- the engine log ----------------------------------------------------------------------


@router.get("/settings/log")
async def log(
    request: Request, paths: HomePathsDep, level: Annotated[str, Query(max_length=16)] = "debug"
) -> Response:
    """The log's last lines at ``level`` or above (any other value: every level)."""
    session = await guard(request)
    if isinstance(session, Response):
        return session
    minimum = level.lower() if level.lower() in LOG_LEVELS else "debug"
    path = paths.logs / "engine.log"
    tail = await asyncio.to_thread(read_tail, path, minimum)  # file reads off the loop
    return page(
        request,
        "settings_log.html",
        session=session,
        tail=tail,
        path=str(path),
        level=minimum,
        levels=LOG_LEVELS,
        shown=SHOWN_LINES,
    )
