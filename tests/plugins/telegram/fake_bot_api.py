"""A fake Telegram Bot API on loopback: real HTTP, the real method names, recorded calls.

python-telegram-bot talks to it through ``base_url`` exactly as it would to
api.telegram.org: form-encoded requests, ``{"ok": true, "result": ...}`` answers,
long-polled ``getUpdates`` with offset semantics. Tests queue updates and read
back every call the bot made. Files go both ways: ``serve`` puts bytes behind
``getFile`` and the file URL, and an upload (multipart) is recorded as ``Upload``.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import socket
import time
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.datastructures import UploadFile
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

BOT_USER = {"id": 4242, "is_bot": True, "first_name": "ClayBot", "username": "clay_test_bot"}


@dataclass
class Call:
    method: str
    params: dict[str, Any]


@dataclass(frozen=True)
class Upload:
    """A file the bot uploaded (a multipart part)."""

    filename: str | None
    data: bytes


@dataclass
class FakeBotApi:
    token: str = "123:abc"
    calls: list[Call] = field(default_factory=list)
    fail_parse: set[str] = field(default_factory=set)  # texts answered with a parse error
    _errors: dict[str, list[dict[str, Any] | None]] = field(default_factory=dict)
    _updates: list[dict[str, Any]] = field(default_factory=list)
    _replays: list[dict[str, Any]] = field(default_factory=list)
    _arrived: asyncio.Event = field(default_factory=asyncio.Event)
    _update_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(1))
    _message_ids: itertools.count[int] = field(default_factory=lambda: itertools.count(500))
    files: dict[str, bytes] = field(default_factory=dict)  # file_id -> what getFile serves
    port: int = 0
    _polls: int = 0
    _holds: dict[str, asyncio.Event] = field(default_factory=dict)
    held: int = 0  # requests waiting at a hold now

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/bot"

    # -- what the test does -----------------------------------------------------------

    def push(self, update: dict[str, Any]) -> dict[str, Any]:
        self._updates.append(update)
        self._arrived.set()
        return update

    def message(
        self,
        user_id: int,
        text: str | None,
        *,
        chat_type: str = "private",
        photo_caption: str | None = None,
    ) -> dict[str, Any]:
        """A message from ``user_id``; without ``text`` it is a photo (maybe captioned)."""
        update_id = next(self._update_ids)
        message: dict[str, Any] = {
            "message_id": update_id * 10,
            "date": int(time.time()),
            "chat": {"id": user_id, "type": chat_type, "first_name": "User"},
            "from": {"id": user_id, "is_bot": False, "first_name": "User"},
        }
        if text is not None:
            message["text"] = text
        else:
            message["photo"] = [
                {"file_id": "p1", "file_unique_id": "u1", "width": 90, "height": 90}
            ]
            if photo_caption is not None:
                message["caption"] = photo_caption
        return self.push({"update_id": update_id, "message": message})

    def serve(self, file_id: str, data: bytes) -> None:
        """Serve ``data`` as ``file_id`` (``getFile``, then the file URL)."""
        self.files[file_id] = data

    def media(
        self, user_id: int, kind: str, payload: Any, *, caption: str | None = None
    ) -> dict[str, Any]:
        """A private message carrying ``payload`` under ``kind`` (``photo``: a list of
        sizes; ``document``, ``voice``, ``audio``: one object)."""
        update_id = next(self._update_ids)
        message: dict[str, Any] = {
            "message_id": update_id * 10,
            "date": int(time.time()),
            "chat": {"id": user_id, "type": "private", "first_name": "User"},
            "from": {"id": user_id, "is_bot": False, "first_name": "User"},
            kind: payload,
        }
        if caption is not None:
            message["caption"] = caption
        return self.push({"update_id": update_id, "message": message})

    def press(self, user_id: int, data: str, message_id: int) -> dict[str, Any]:
        update_id = next(self._update_ids)
        return self.push(
            {
                "update_id": update_id,
                "callback_query": {
                    "id": f"cbq-{update_id}",
                    "from": {"id": user_id, "is_bot": False, "first_name": "User"},
                    "chat_instance": "ci",
                    "data": data,
                    "message": {
                        "message_id": message_id,
                        "date": int(time.time()),
                        "chat": {"id": user_id, "type": "private", "first_name": "User"},
                        "from": BOT_USER,
                        "text": "prompt",
                    },
                },
            }
        )

    def fail(
        self,
        method: str,
        status: int,
        description: str,
        *,
        times: int = 1,
        retry_after: int | None = None,
        after: int = 0,
    ) -> None:
        """Answer the next ``times`` calls of ``method`` with this Bot API error, once
        ``after`` more calls have been answered as usual."""
        error: dict[str, Any] = {"ok": False, "error_code": status, "description": description}
        if retry_after is not None:
            error["parameters"] = {"retry_after": retry_after}
        self._errors.setdefault(method, []).extend([None] * after + [error] * times)

    def hold(self, method: str) -> None:
        """Calls of ``method`` wait, before their body is read, until ``release``: what
        a client sends meanwhile is not taken (as Telegram takes nothing of an upload
        cut off by a dying client)."""
        self._holds[method] = asyncio.Event()

    def release(self, method: str) -> None:
        self._holds.pop(method).set()

    def redeliver(self, update: dict[str, Any]) -> None:
        """Deliver an update once more, whatever the offset says (as after a lost ack)."""
        self._replays.append(update)
        self._arrived.set()

    def sent(self, method: str = "sendMessage") -> list[dict[str, Any]]:
        return [call.params for call in self.calls if call.method == method]

    def methods(self) -> list[str]:
        return [call.method for call in self.calls if call.method != "getUpdates"]

    # -- the server ---------------------------------------------------------------------

    async def _endpoint(self, request: Request) -> JSONResponse:
        token, method = request.path_params["token"], request.path_params["method"]
        hold = self._holds.get(method)
        if hold is not None:
            self.held += 1
            try:
                await hold.wait()
            finally:
                self.held -= 1
        if token != self.token:
            return JSONResponse(
                {"ok": False, "error_code": 401, "description": "Unauthorized"}, 401
            )
        form = await request.form()
        params: dict[str, Any] = {}
        for key, value in form.items():
            if isinstance(value, UploadFile):
                params[key] = Upload(value.filename, await value.read())
                continue
            text = str(value)
            try:
                params[key] = json.loads(text)
            except ValueError:
                params[key] = text
        self.calls.append(Call(method, params))
        error = self._errors[method].pop(0) if self._errors.get(method) else None
        if error is not None:
            return JSONResponse(error, error["error_code"])
        if method == "getUpdates":
            return await self._get_updates(params)
        if method == "sendMessage":
            text = str(params.get("text"))
            if params.get("parse_mode") == "HTML" and text in self.fail_parse:
                return JSONResponse(
                    {
                        "ok": False,
                        "error_code": 400,
                        "description": "Bad Request: can't parse entities: unsupported start tag",
                    },
                    400,
                )
            return self._ok(self._message(params))
        if method in ("sendPhoto", "sendDocument"):
            return self._ok(self._message(params))
        if method == "getFile":
            file_id = str(params["file_id"])
            if file_id not in self.files:
                return JSONResponse(
                    {"ok": False, "error_code": 400, "description": "Bad Request: invalid file_id"},
                    400,
                )
            return self._ok(
                {
                    "file_id": file_id,
                    "file_unique_id": f"u-{file_id}",
                    "file_size": len(self.files[file_id]),
                    "file_path": f"documents/{file_id}",
                }
            )
        if method == "editMessageText":
            return self._ok(self._message(params, message_id=int(params["message_id"])))
        if method == "getMe":
            return self._ok(BOT_USER)
        return self._ok(True)  # answerCallbackQuery, deleteWebhook, setMyCommands, ...

    def _message(self, params: dict[str, Any], message_id: int | None = None) -> dict[str, Any]:
        chat_id = int(params["chat_id"])
        return {
            "message_id": message_id or next(self._message_ids),
            "date": int(time.time()),
            "chat": {"id": chat_id, "type": "private", "first_name": "User"},
            "from": BOT_USER,
            "text": str(params.get("text", "")),
        }

    async def _get_updates(self, params: dict[str, Any]) -> JSONResponse:
        offset = int(params.get("offset") or 0)
        deadline = time.monotonic() + float(params.get("timeout") or 0)
        # A newer getUpdates supersedes a waiting one (whose client may be gone, as
        # after a restart): the old one must not take the updates meant for the new.
        self._polls += 1
        poll = self._polls
        self._arrived.set()
        while True:
            if poll != self._polls:
                return self._ok([])
            # An offset confirms every update before it: those are gone for good.
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
            ready, self._replays = [*self._replays, *self._updates], []
            if ready or time.monotonic() >= deadline:
                return self._ok(ready)
            self._arrived.clear()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), deadline - time.monotonic())

    async def _download(self, request: Request) -> Response:
        token, path = request.path_params["token"], request.path_params["path"]
        file_id = path.rsplit("/", 1)[-1]
        if token != self.token or file_id not in self.files:
            return Response(status_code=404)
        self.calls.append(Call("download", {"file_id": file_id}))
        return Response(self.files[file_id], media_type="application/octet-stream")

    @staticmethod
    def _ok(result: Any) -> JSONResponse:
        return JSONResponse({"ok": True, "result": result})

    @contextlib.asynccontextmanager
    async def running(self, sock: socket.socket | None = None) -> AsyncIterator[FakeBotApi]:
        """Serve on ``sock`` (bound, not listening: a port that refused connections
        until now), else on a free port."""
        app = Starlette(
            routes=[
                Route("/bot{token}/{method}", self._endpoint, methods=["GET", "POST"]),
                Route("/file/bot{token}/{path:path}", self._download, methods=["GET"]),
            ]
        )
        if sock is None:
            sock = socket.socket()
            sock.bind(("127.0.0.1", 0))
        self.port = sock.getsockname()[1]
        # A long poll the client gave up on still runs here: do not wait for it on exit.
        config = uvicorn.Config(
            app, log_level="warning", lifespan="off", timeout_graceful_shutdown=1
        )
        server = uvicorn.Server(config)
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        try:
            yield self
        finally:
            server.should_exit = True
            await task
            sock.close()
