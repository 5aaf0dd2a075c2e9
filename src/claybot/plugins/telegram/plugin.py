"""The ``telegram`` plugin: settings, the bot token from auth.json, the connector's life."""

from __future__ import annotations

import asyncio
import contextlib
from typing import Any

from pydantic import Field

from claybot.plugin_api import (
    CamelModel,
    PluginApi,
    PluginAuthFailed,
    PluginDefinition,
    PluginNotReady,
)

PLUGIN_ID = "telegram"
DEFAULT_BASE_URL = "https://api.telegram.org/bot"
COMMANDS = [("reset", "Start a new conversation"), ("stop", "Stop the current answer")]


def file_url(base_url: str) -> str:
    """Where the Bot API at ``base_url`` serves files: ``…/bot`` becomes ``…/file/bot``
    (api.telegram.org and a local Bot API server alike)."""
    head, bot, tail = base_url.rpartition("/bot")
    return f"{head}/file{bot}{tail}" if bot else f"{base_url.rstrip('/')}/file"


class TelegramSettings(CamelModel):
    allowed_user_ids: list[int] = Field(min_length=1, description="Telegram user ids allowed in.")
    base_url: str = Field(default=DEFAULT_BASE_URL, description="Bot API URL (tests, proxies).")
    poll_timeout_s: int = Field(default=30, ge=0, le=50)


class TelegramPlugin:
    def __init__(self, api: PluginApi[TelegramSettings]) -> None:
        self._api = api
        self._connector: Any = None
        self._bot: Any = None

    async def load(self) -> None:
        # Imported here: python-telegram-bot is only loaded by engines that use it.
        from telegram import Bot, BotCommand
        from telegram.error import Forbidden, InvalidToken, TelegramError

        from claybot.plugins.telegram.connector import TelegramConnector
        from claybot.plugins.telegram.state import TelegramState

        entry = self._api.auth()
        token = entry.secret("token") if entry is not None else None
        if not token:
            raise PluginAuthFailed(
                f"no bot token: run `claybot auth set {self._api.instance_id} token <token>`"
            )
        settings = self._api.settings
        self._bot = Bot(
            token, base_url=settings.base_url, base_file_url=file_url(settings.base_url)
        )
        try:
            await self._bot.initialize()  # getMe: checks the token
        # ``from None``: PTB puts the token itself in InvalidToken's message, and a
        # chained cause would carry it into any log that prints the traceback.
        except (InvalidToken, Forbidden):
            raise PluginAuthFailed(
                f"Telegram rejected the bot token of {self._api.instance_id!r}: set the right "
                f"one with `claybot auth set {self._api.instance_id} token <token>`"
            ) from None
        except TelegramError as exc:
            raise PluginNotReady(
                f"Telegram is not reachable at the configured baseUrl: {type(exc).__name__}"
            ) from None
        state = TelegramState(self._api.data_dir / "state.json")
        await asyncio.to_thread(state.load)
        self._connector = TelegramConnector(
            self._api,
            self._bot,
            allowed_user_ids=frozenset(settings.allowed_user_ids),
            poll_timeout_s=settings.poll_timeout_s,
            state=state,
        )
        self._api.registrar.register_connector(self._connector)
        with contextlib.suppress(TelegramError):  # the command menu is a convenience
            await self._bot.set_my_commands([BotCommand(name, text) for name, text in COMMANDS])
        self._connector.start_polling()

    async def unload(self) -> None:
        if self._connector is not None:
            await self._connector.stop()
        if self._bot is not None:
            with contextlib.suppress(Exception):  # already closed or never initialised
                await self._bot.shutdown()


def telegram_definition() -> PluginDefinition[TelegramSettings]:
    return PluginDefinition(
        id=PLUGIN_ID,
        name="Telegram",
        description="Chat with agents from Telegram: private chats of allowlisted users.",
        settings_model=TelegramSettings,
        create=TelegramPlugin,
    )
