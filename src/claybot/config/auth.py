"""The auth.json model: credentials keyed by provider id or plugin instance id."""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import BaseModel, ConfigDict, RootModel
from typing_extensions import TypedDict

from claybot.kernel.errors import InvalidInput

REDACTED = "***"
AuthType = Literal["apiKey", "token", "oauth"]
AUTH_TYPES: tuple[str, ...] = get_args(AuthType)


class RedactedAuthEntry(TypedDict):
    """An auth.json entry as it may be shown: its type and its fields' names."""

    type: AuthType
    fields: list[str]  # sorted; never a value


class AuthEntry(BaseModel):
    # Entries carry free-form fields (apiKey, token, baseUrl...) next to the type.
    model_config = ConfigDict(extra="allow")
    type: AuthType = "apiKey"

    def secret(self, key: str) -> str | None:
        value = (self.model_extra or {}).get(key)
        return value if isinstance(value, str) else None

    def redacted(self) -> RedactedAuthEntry:
        """What may be shown: the field names, never their values."""
        return {"type": self.type, "fields": sorted((self.model_extra or {}).keys())}


class AuthFile(RootModel[dict[str, AuthEntry]]):
    root: dict[str, AuthEntry] = {}

    def get(self, entry_id: str) -> AuthEntry | None:
        return self.root.get(entry_id)

    def with_field(self, entry_id: str, key: str, value: str) -> AuthFile:
        entries = {name: entry.model_copy() for name, entry in self.root.items()}
        current = entries.get(entry_id)
        data: dict[str, Any] = current.model_dump() if current is not None else {}
        if key == "type":
            if value not in AUTH_TYPES:
                # The value is not echoed: what is posted to auth.json is usually a secret.
                raise InvalidInput(
                    f"an entry's type is one of {', '.join(AUTH_TYPES)}", field="value"
                )
            data["type"] = value
        else:
            data[key] = value
            data.setdefault("type", "token" if key == "token" else "apiKey")
        entries[entry_id] = AuthEntry.model_validate(data)
        return AuthFile(entries)

    def without(self, entry_id: str, key: str | None = None) -> AuthFile:
        """This file without the entry (``key`` None) or without one of its fields; an
        entry left with no field goes as well."""
        entries = {name: entry.model_copy() for name, entry in self.root.items()}
        current = entries.pop(entry_id, None)
        if current is not None and key is not None:
            data = {k: v for k, v in current.model_dump().items() if k != key}
            if set(data) - {"type"}:
                entries[entry_id] = AuthEntry.model_validate(data)
        return AuthFile(entries)

    def has(self, entry_id: str, key: str | None = None) -> bool:
        entry = self.root.get(entry_id)
        if entry is None:
            return False
        return key is None or key in (entry.model_extra or {})
