"""Plugin errors, each naming what went wrong and what happens next.

They are house errors (``claybot.kernel.errors.ClayError``): each carries a stable
``code``, the HTTP ``status`` the API answers with, and, where one field is to
blame, the ``field`` (as the request spells it: ``pluginId``, ``instanceId``,
``settings.timezone``).

Three of them are also what a plugin's ``load()`` raises to say why it cannot
start (the Home Assistant split): ``PluginNotReady`` (retry later),
``PluginAuthFailed`` (tell the user to fix auth.json) and
``PluginSettingsInvalid`` (refuse the load with the field named).
"""

from __future__ import annotations

from typing import Any

from claybot.kernel.errors import ClayError, ErrorObject
from claybot.kernel.errors import LoadFailureKind as LoadFailureKind  # re-exported


class LoadFailureObject(ErrorObject):
    """A failed load as the API's ``error`` object: the house error's fields and why."""

    kind: LoadFailureKind


class PluginError(ClayError):
    code = "plugin_error"

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message, field=field)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        # Plugins written before the house error set ``http_status``; it still counts.
        super().__init_subclass__(**kwargs)
        legacy = cls.__dict__.get("http_status")
        if isinstance(legacy, int):
            cls.status = legacy

    @property
    def http_status(self) -> int:
        """The old name of ``status``, kept for plugins that read it."""
        return self.status


class UnknownPlugin(PluginError):
    code = "unknown_plugin"
    status = 404

    def __init__(self, plugin_id: str) -> None:
        super().__init__(f"no plugin with id {plugin_id!r} is installed", field="pluginId")
        self.plugin_id = plugin_id


class InvalidInstanceId(PluginError):
    code = "invalid_instance_id"

    def __init__(self, instance_id: str, problem: str) -> None:
        super().__init__(f"instance id {instance_id!r}: {problem}", field="instanceId")
        self.instance_id = instance_id


class InstanceAlreadyLoaded(PluginError):
    code = "instance_already_loaded"
    status = 409

    def __init__(self, instance_id: str) -> None:
        super().__init__(
            f"plugin instance {instance_id!r} is already loaded; unload it first",
            field="instanceId",
        )
        self.instance_id = instance_id


class InstanceIdTaken(PluginError):
    """The id is configured for a different plugin; loading would overwrite its settings."""

    code = "instance_id_taken"
    status = 409

    def __init__(self, instance_id: str, owner_plugin_id: str) -> None:
        super().__init__(
            f"instance id {instance_id!r} is configured for plugin {owner_plugin_id!r}; "
            "choose another instance id",
            field="instanceId",
        )
        self.instance_id = instance_id


class InstanceNotFound(PluginError):
    code = "instance_not_found"
    status = 404

    def __init__(self, instance_id: str, detail: str = "is not loaded") -> None:
        super().__init__(f"plugin instance {instance_id!r} {detail}", field="instanceId")
        self.instance_id = instance_id


class ExclusivePluginConflict(PluginError):
    code = "exclusive_plugin_conflict"
    status = 409

    def __init__(self, message: str) -> None:
        super().__init__(message, field="pluginId")


class PluginSettingsInvalid(PluginError):
    code = "invalid_settings"

    def __init__(self, plugin_id: str, problem: str, *, field: str = "settings") -> None:
        super().__init__(f"invalid settings for plugin {plugin_id!r}: {problem}", field=field)
        self.plugin_id = plugin_id
        self.problem = problem


class PluginNotReady(PluginError):
    """Raised by a plugin's load(): a dependency is not there yet; retrying later may work."""

    code = "plugin_not_ready"
    status = 503


class PluginAuthFailed(PluginError):
    """Raised by a plugin's load(): its credentials in auth.json are missing or rejected."""

    code = "plugin_auth_failed"


class RegistrationError(PluginError):
    """A plugin registered something that clashes with what is already there."""

    code = "registration_conflict"
    status = 409


class PluginLoadFailed(PluginError):
    """The instance's create() or load() failed; nothing it registered is left behind."""

    code = "plugin_load_failed"
    status = 502

    def __init__(
        self,
        instance_id: str,
        reason: str,
        *,
        kind: LoadFailureKind = "error",
        field: str | None = None,
    ) -> None:
        super().__init__(f"plugin instance {instance_id!r} failed to load: {reason}", field=field)
        self.instance_id = instance_id
        self.reason = reason
        self.kind = kind
        if kind == "not_ready":
            self.status = 503
        elif kind in ("auth_failed", "settings_invalid"):
            self.status = 400

    def to_dict(self) -> LoadFailureObject:
        return {**super().to_dict(), "kind": self.kind}


class SettingsFileError(PluginError):
    """settings.json cannot be read or written, so the change cannot be kept."""

    code = "settings_file_error"
    status = 500


class FileRefused(PluginError):
    """The file store refused a file a plugin handed it: too large, or the quota is full.

    ``code`` and ``message`` are the store's own (``file_too_large``,
    ``file_quota_exceeded``), so what the plugin tells its user names the setting.
    """

    code = "file_refused"
    status = 413

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message, field="file")
        if code is not None:
            self.code = code


class FileMissing(PluginError):
    """No stored file has this id (collected, or never stored)."""

    code = "file_not_found"
    status = 404

    def __init__(self, file_id: str) -> None:
        super().__init__(f"no stored file {file_id!r}", field="fileId")
        self.file_id = file_id
