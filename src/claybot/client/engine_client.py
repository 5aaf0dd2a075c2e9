"""Talking to a running engine over its Unix socket (the CLI's only door).

Each method answers with the model the route answers with (``claybot.wire``), read
from the answer's bytes. The wire modules are imported inside the methods: the CLI
imports this module for every command, and a command needs only its own models
(all of them together take tens of milliseconds to build).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeVar
from urllib.parse import quote

import httpx
from httpx_sse import connect_sse
from pydantic import BaseModel, ValidationError

from claybot.client.errors import EngineApiError, EngineNotRunning

if TYPE_CHECKING:
    from claybot.wire.agents import AgentList, AgentReset, AgentStopped, MessageAccepted
    from claybot.wire.base import Ok
    from claybot.wire.cron import CronRunQueued, CronTaskList, CronTaskRemoved, CronTaskSaved
    from claybot.wire.dashboard import DashboardLink
    from claybot.wire.events import EventFrame
    from claybot.wire.files import StoredFile
    from claybot.wire.heartbeat import HeartbeatTaskList, HeartbeatTaskRemoved, HeartbeatTaskSaved
    from claybot.wire.history import AgentHistory
    from claybot.wire.jobs import JobCreated, JobDetail, JobPage, LogPage, Responded
    from claybot.wire.keys import ApiKeyCreated, ApiKeyList, ApiKeyRevoked
    from claybot.wire.permissions import PermissionDecided, PermissionRequestList
    from claybot.wire.plugins import PluginListing, PluginLoaded, PluginUnloaded
    from claybot.wire.proactive import (
        ExecutionList,
        OneProactiveAgent,
        ProactiveAgentDeleted,
        ProactiveAgentList,
        ProactiveRunQueued,
    )
    from claybot.wire.providers import (
        AuthFieldSet,
        AuthListing,
        AuthRemoved,
        ProviderList,
        ProviderListing,
        ProviderTested,
    )
    from claybot.wire.status import EngineStatus

__all__ = ["EngineApiError", "EngineClient", "EngineNotRunning"]

BASE_URL = "http://claybot"
ENGINE = "/v1/engine"
JOBS = "/api/v1"  # seed 002's jobs API
PROACTIVE = "/api/agents"  # seed 004's proactive agents

M = TypeVar("M", bound=BaseModel)
Body = Mapping[str, Any]  # a request body, checked by the engine (``claybot.wire.bodies``)
ProviderChange = Literal["enable", "disable", "default"]


class EngineClient:
    def __init__(
        self,
        socket_path: Path,
        *,
        timeout_s: float = 30.0,
        transport: httpx.BaseTransport | None = None,  # a test's stand-in for the socket
    ) -> None:
        self.socket_path = socket_path
        self._client = httpx.Client(
            transport=transport or httpx.HTTPTransport(uds=str(socket_path)),
            base_url=BASE_URL,
            timeout=timeout_s,
        )

    def close(self) -> None:
        self._client.close()

    def __enter__(self) -> EngineClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def is_running(self) -> bool:
        if not self.socket_path.exists():
            return False
        try:
            self._send("GET", f"{ENGINE}/status")
        except EngineNotRunning:
            return False
        return True

    # -- the low level --------------------------------------------------------------

    def request(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        """Any route's JSON answer, unchecked: for a reader that must cope with an answer
        the models do not describe (``claybot doctor`` reads a status from an engine of
        another version, and takes what it finds). Everything else has a method below."""
        body = _json_of(self._send(method, path, **kwargs))
        return body if isinstance(body, dict) else {"value": body}

    def _send(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        """The engine's answer, or (an error status) its error raised as EngineApiError."""
        try:
            response = self._client.request(method, path, **kwargs)
        except (httpx.ConnectError, FileNotFoundError, ConnectionRefusedError) as exc:
            raise EngineNotRunning(f"no engine answers on {self.socket_path}") from exc
        _raise_for_error(response)
        return response

    def _call(
        self,
        answer: type[M],
        method: str,
        path: str,
        body: Body | None = None,
        **params: Any,
    ) -> M:
        """``method path`` (with a JSON body for a POST or a PUT), its answer as ``answer``."""
        extra: dict[str, Any] = {"params": _given(params)}
        if method in ("POST", "PUT"):
            extra["json"] = dict(body or {})
        return _read(answer, self._send(method, path, **extra), f"{method} {path}")

    def get_text(self, path: str, **params: Any) -> str:
        """A text/plain route (a proactive agent's log); its errors are JSON all the same."""
        return self._send("GET", path, params=_given(params)).text

    def get_bytes(self, path: str, **params: Any) -> bytes:
        """A route that answers with a file's bytes; its errors are JSON all the same."""
        return self._send("GET", path, params=_given(params)).content

    # -- the engine -----------------------------------------------------------------

    def status(self) -> EngineStatus:
        from claybot.wire.status import EngineStatus

        return self._call(EngineStatus, "GET", f"{ENGINE}/status")

    def shutdown(self) -> Ok:
        from claybot.wire.base import Ok

        return self._call(Ok, "POST", f"{ENGINE}/shutdown")

    def dashboard_link(self) -> DashboardLink:
        from claybot.wire.dashboard import DashboardLink

        return self._call(DashboardLink, "POST", f"{ENGINE}/dashboard/links")

    def events(self, last_event_id: int | None = None) -> Iterator[EventFrame]:
        """Follow the SSE stream; yields each frame (the init frame first).

        A frame's payload stays a mapping: its shape depends on its type (the init
        frame's, ``kernel/event_types.py``'s, and the free-form ones plugins and
        proactive agents emit), and a reader picks what it knows by ``type``.
        """
        from claybot.wire.events import EventFrame

        headers = {"Last-Event-ID": str(last_event_id)} if last_event_id is not None else {}
        try:
            with connect_sse(
                self._client,
                "GET",
                f"{ENGINE}/events",
                headers=headers,
                timeout=httpx.Timeout(None, connect=5),
            ) as source:
                if source.response.is_error:  # refused (a bad Last-Event-ID): its body says why
                    source.response.read()
                    _raise_for_error(source.response)
                for event in source.iter_sse():
                    if event.data:  # no data, no event (the SSE rule; a ping after an id)
                        yield EventFrame.model_validate_json(event.data)
        except (httpx.ConnectError, FileNotFoundError) as exc:
            raise EngineNotRunning(f"no engine answers on {self.socket_path}") from exc

    # -- agents, messages, files ----------------------------------------------------

    def agents(self) -> AgentList:
        from claybot.wire.agents import AgentList

        return self._call(AgentList, "GET", f"{ENGINE}/agents")

    def history(
        self,
        agent_id: str,
        *,
        limit: int | None = None,
        after: int | None = None,
        before: int | None = None,
    ) -> AgentHistory:
        from claybot.wire.history import AgentHistory

        path = f"{ENGINE}/agents/{agent_id}/history"
        return self._call(AgentHistory, "GET", path, limit=limit, after=after, before=before)

    def reset_agent(self, agent_id: str) -> AgentReset:
        from claybot.wire.agents import AgentReset

        return self._call(AgentReset, "POST", f"{ENGINE}/agents/{agent_id}/reset")

    def stop_agent(self, agent_id: str) -> AgentStopped:
        from claybot.wire.agents import AgentStopped

        return self._call(AgentStopped, "POST", f"{ENGINE}/agents/{agent_id}/stop")

    def send_message(self, body: Body) -> MessageAccepted:
        """``body`` is ``PostMessage``'s (``claybot.wire.bodies``)."""
        from claybot.wire.agents import MessageAccepted

        return self._call(MessageAccepted, "POST", f"{ENGINE}/messages", body)

    def upload_file(self, name: str, data: bytes) -> StoredFile:
        """A multipart upload of one file (field ``file``), as ``POST /v1/engine/files`` takes."""
        from claybot.wire.files import StoredFile

        path = f"{ENGINE}/files"
        sent = self._send("POST", path, files={"file": (name, data)})
        return _read(StoredFile, sent, f"POST {path}")

    def file_bytes(self, file_id: str, name: str | None = None) -> bytes:
        return self.get_bytes(f"{ENGINE}/files/{file_id}", name=name)

    # -- permissions ----------------------------------------------------------------

    def permissions(self, status: str | None = None) -> PermissionRequestList:
        from claybot.wire.permissions import PermissionRequestList

        return self._call(PermissionRequestList, "GET", f"{ENGINE}/permissions", status=status)

    def decide_permission(self, request_id: str, decision: str, by: str) -> PermissionDecided:
        from claybot.wire.permissions import PermissionDecided

        body = {"decision": decision, "by": by}
        return self._call(PermissionDecided, "POST", f"{ENGINE}/permissions/{request_id}", body)

    # -- settings: auth.json, providers, plugins, keys ------------------------------

    def auth(self) -> AuthListing:
        from claybot.wire.providers import AuthListing

        return self._call(AuthListing, "GET", f"{ENGINE}/auth")

    def set_auth(self, entry_id: str, key: str, value: str) -> AuthFieldSet:
        from claybot.wire.providers import AuthFieldSet

        body = {"id": entry_id, "key": key, "value": value}
        return self._call(AuthFieldSet, "POST", f"{ENGINE}/auth", body)

    def remove_auth(self, entry_id: str, key: str | None = None) -> AuthRemoved:
        from claybot.wire.providers import AuthRemoved

        path = f"{ENGINE}/auth/{quote(entry_id, safe='')}"
        return self._call(AuthRemoved, "DELETE", path, key=key)

    def providers(self) -> ProviderListing:
        from claybot.wire.providers import ProviderListing

        return self._call(ProviderListing, "GET", f"{ENGINE}/providers")

    def upsert_provider(self, body: Body) -> ProviderList:
        """``body`` is ``UpsertProvider``'s: a provider entry and its ``position``."""
        from claybot.wire.providers import ProviderList

        return self._call(ProviderList, "POST", f"{ENGINE}/providers", body)

    def change_provider(self, provider_id: str, change: ProviderChange) -> ProviderList:
        from claybot.wire.providers import ProviderList

        return self._call(ProviderList, "POST", f"{_provider(provider_id)}/{change}")

    def remove_provider(self, provider_id: str) -> ProviderList:
        from claybot.wire.providers import ProviderList

        return self._call(ProviderList, "DELETE", _provider(provider_id))

    def test_provider(self, provider_id: str) -> ProviderTested:
        from claybot.wire.providers import ProviderTested

        return self._call(ProviderTested, "POST", f"{_provider(provider_id)}/test")

    def plugins(self) -> PluginListing:
        from claybot.wire.plugins import PluginListing

        return self._call(PluginListing, "GET", f"{ENGINE}/plugins")

    def load_plugin(self, body: Body) -> PluginLoaded:
        """``body`` is ``LoadPlugin``'s."""
        from claybot.wire.plugins import PluginLoaded

        return self._call(PluginLoaded, "POST", f"{ENGINE}/plugins/load", body)

    def unload_plugin(self, instance_id: str) -> PluginUnloaded:
        from claybot.wire.plugins import PluginUnloaded

        body = {"instanceId": instance_id}
        return self._call(PluginUnloaded, "POST", f"{ENGINE}/plugins/unload", body)

    def keys(self) -> ApiKeyList:
        from claybot.wire.keys import ApiKeyList

        return self._call(ApiKeyList, "GET", f"{ENGINE}/keys")

    def create_key(self, body: Body) -> ApiKeyCreated:
        """``body`` is ``CreateKey``'s."""
        from claybot.wire.keys import ApiKeyCreated

        return self._call(ApiKeyCreated, "POST", f"{ENGINE}/keys", body)

    def revoke_key(self, key_id: str) -> ApiKeyRevoked:
        from claybot.wire.keys import ApiKeyRevoked

        return self._call(ApiKeyRevoked, "POST", f"{ENGINE}/keys/{key_id}/revoke")

    # -- cron and the heartbeat -----------------------------------------------------

    def cron_tasks(self) -> CronTaskList:
        from claybot.wire.cron import CronTaskList

        return self._call(CronTaskList, "GET", f"{ENGINE}/cron/tasks")

    def add_cron_task(self, body: Body) -> CronTaskSaved:
        """``body`` is ``AddCronTask``'s."""
        from claybot.wire.cron import CronTaskSaved

        return self._call(CronTaskSaved, "POST", f"{ENGINE}/cron/tasks", body)

    def remove_cron_task(self, task_id: str) -> CronTaskRemoved:
        from claybot.wire.cron import CronTaskRemoved

        return self._call(CronTaskRemoved, "DELETE", f"{ENGINE}/cron/tasks/{task_id}")

    def set_cron_task_enabled(self, task_id: str, enabled: bool) -> CronTaskSaved:
        from claybot.wire.cron import CronTaskSaved

        verb = "enable" if enabled else "disable"
        return self._call(CronTaskSaved, "POST", f"{ENGINE}/cron/tasks/{task_id}/{verb}")

    def run_cron_task(self, task_id: str) -> CronRunQueued:
        from claybot.wire.cron import CronRunQueued

        return self._call(CronRunQueued, "POST", f"{ENGINE}/cron/tasks/{task_id}/run")

    def heartbeat_tasks(self) -> HeartbeatTaskList:
        from claybot.wire.heartbeat import HeartbeatTaskList

        return self._call(HeartbeatTaskList, "GET", f"{ENGINE}/heartbeat/tasks")

    def add_heartbeat_task(self, body: Body) -> HeartbeatTaskSaved:
        """``body`` is ``AddHeartbeatTask``'s."""
        from claybot.wire.heartbeat import HeartbeatTaskSaved

        return self._call(HeartbeatTaskSaved, "POST", f"{ENGINE}/heartbeat/tasks", body)

    def remove_heartbeat_task(self, task_id: str) -> HeartbeatTaskRemoved:
        from claybot.wire.heartbeat import HeartbeatTaskRemoved

        path = f"{ENGINE}/heartbeat/tasks/{task_id}"
        return self._call(HeartbeatTaskRemoved, "DELETE", path)

    def run_heartbeat(self, task_ids: list[str] | None = None) -> Ok:
        """Run the heartbeat now: every task, or only those of ``task_ids``."""
        from claybot.wire.base import Ok

        body = {"ids": task_ids} if task_ids else {}
        return self._call(Ok, "POST", f"{ENGINE}/heartbeat/run", body)

    # -- seed 002's jobs --------------------------------------------------------------

    def create_job(self, body: Body) -> JobCreated:
        """``body`` is ``CreateJob``'s (``claybot.wire.jobs``)."""
        from claybot.wire.jobs import JobCreated

        return self._call(JobCreated, "POST", f"{JOBS}/jobs", body)

    def jobs(
        self, *, status: str | None = None, limit: int | None = None, offset: int | None = None
    ) -> JobPage:
        from claybot.wire.jobs import JobPage

        return self._call(JobPage, "GET", f"{JOBS}/jobs", status=status, limit=limit, offset=offset)

    def job(self, job_id: str) -> JobDetail:
        from claybot.wire.jobs import JobDetail

        return self._call(JobDetail, "GET", f"{JOBS}/jobs/{job_id}")

    def respond_to_job(self, job_id: str, body: Body) -> Responded:
        """``body`` is ``RespondToJob``'s."""
        from claybot.wire.jobs import Responded

        return self._call(Responded, "POST", f"{JOBS}/jobs/{job_id}/respond", body)

    def cancel_job(self, job_id: str) -> JobDetail:
        from claybot.wire.jobs import JobDetail

        return self._call(JobDetail, "POST", f"{JOBS}/jobs/{job_id}/cancel")

    def job_logs(
        self, job_id: str, *, after: int | None = None, limit: int | None = None
    ) -> LogPage:
        from claybot.wire.jobs import LogPage

        path = f"{JOBS}/jobs/{job_id}/logs"
        return self._call(LogPage, "GET", path, after=after, limit=limit)

    # -- seed 004's proactive agents ----------------------------------------------------

    def proactive_agents(self) -> ProactiveAgentList:
        from claybot.wire.proactive import ProactiveAgentList

        return self._call(ProactiveAgentList, "GET", PROACTIVE)

    def create_proactive_agent(self, body: Body) -> OneProactiveAgent:
        from claybot.wire.proactive import OneProactiveAgent

        return self._call(OneProactiveAgent, "POST", PROACTIVE, body)

    def update_proactive_agent(self, agent_id: str, body: Body) -> OneProactiveAgent:
        from claybot.wire.proactive import OneProactiveAgent

        return self._call(OneProactiveAgent, "PUT", f"{PROACTIVE}/{agent_id}", body)

    def pause_proactive_agent(self, agent_id: str) -> OneProactiveAgent:
        from claybot.wire.proactive import OneProactiveAgent

        return self._call(OneProactiveAgent, "POST", f"{PROACTIVE}/{agent_id}/pause")

    def resume_proactive_agent(self, agent_id: str) -> OneProactiveAgent:
        from claybot.wire.proactive import OneProactiveAgent

        return self._call(OneProactiveAgent, "POST", f"{PROACTIVE}/{agent_id}/resume")

    def execute_proactive_agent(self, agent_id: str) -> ProactiveRunQueued:
        from claybot.wire.proactive import ProactiveRunQueued

        return self._call(ProactiveRunQueued, "POST", f"{PROACTIVE}/{agent_id}/execute")

    def executions(self, agent_id: str, *, limit: int | None = None) -> ExecutionList:
        from claybot.wire.proactive import ExecutionList

        path = f"{PROACTIVE}/{agent_id}/executions"
        return self._call(ExecutionList, "GET", path, limit=limit)

    def delete_proactive_agent(self, agent_id: str) -> ProactiveAgentDeleted:
        from claybot.wire.proactive import ProactiveAgentDeleted

        return self._call(ProactiveAgentDeleted, "DELETE", f"{PROACTIVE}/{agent_id}")


def _provider(provider_id: str) -> str:
    return f"{ENGINE}/providers/{quote(provider_id, safe='')}"


def _read(answer: type[M], response: httpx.Response, what: str) -> M:
    """The answer's bytes as ``answer``; an answer the model does not describe (an engine
    of another version) is the engine's error, with the route named."""
    try:
        return answer.model_validate_json(response.content)
    except ValidationError as exc:
        raise EngineApiError(
            response.status_code,
            "unexpected_answer",
            f"the engine's answer to {what} is not what this client knows: {exc}",
            None,
        ) from exc


def _raise_for_error(response: httpx.Response) -> None:
    """An error status's body, raised as EngineApiError."""
    if response.status_code < 400:
        return
    body = _json_of(response)
    error = body.get("error", {}) if isinstance(body, dict) else {}
    if isinstance(error, str):  # {error, code, field?}: seed 002's, and codeck's
        error = {"code": body.get("code", "error"), "message": error, "field": body.get("field")}
    raise EngineApiError(
        response.status_code,
        str(error.get("code", "error")),
        str(error.get("message", response.text)),
        error.get("field"),
    )


def _given(params: dict[str, Any]) -> dict[str, Any]:
    """Query parameters without the ones left out (None)."""
    return {key: value for key, value in params.items() if value is not None}


def _json_of(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return {}
