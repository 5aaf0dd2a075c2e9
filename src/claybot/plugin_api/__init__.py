"""The public plugin API: everything a plugin imports from ClayBot, and nothing more.

A plugin is a distribution that declares a ``PluginDefinition`` (or a zero-argument
callable returning one) in the ``claybot.plugins`` entry-point group::

    [project.entry-points."claybot.plugins"]
    weather = "claybot_weather:definition"

and imports only this module. The built-in plugins are written the same way (an
import-linter contract keeps them to it), which is what shows that nothing is
missing here. The names below are re-exported from the layers that own them;
this package itself sits below the runtime, so a plugin never reaches the agents,
the engine or the API.
"""

from claybot.config.auth import AuthEntry
from claybot.config.redaction import SECRET
from claybot.config.settings import CamelModel, ProviderSettings
from claybot.connectors.base import (
    Connector,
    InboundMessage,
    OutgoingMessage,
    PermissionPrompter,
    PostedMessage,
)
from claybot.durable.atomic import atomic_write_json
from claybot.files.reference import FileReference
from claybot.kernel.backoff import Backoff
from claybot.mcp_client.settings import McpServerSettings
from claybot.net.address import Resolve, address_refusal, resolve_host
from claybot.net.guarded_fetch import FetchedPage, FetchFailed, FetchRefused, UrlFetcher
from claybot.permissions.granted_open import open_granted
from claybot.permissions.model import Permissions
from claybot.permissions.prompts import (
    PermissionAlreadyDecided,
    PermissionOutcome,
    PermissionPrompt,
)
from claybot.permissions.protected import ProtectedPaths
from claybot.permissions.safe_open import open_beneath
from claybot.permissions.tags import PermissionTagError, check_path, granting_folder, is_within
from claybot.plugin_api.api import PluginApi
from claybot.plugin_api.definition import PluginDefinition, PluginInstance
from claybot.plugin_api.errors import (
    FileMissing,
    FileRefused,
    InstanceNotFound,
    PluginAuthFailed,
    PluginError,
    PluginNotReady,
    PluginSettingsInvalid,
    RegistrationError,
)
from claybot.plugin_api.registrar import PluginRegistrar
from claybot.providers.base import (
    AssistantMessage,
    Attachment,
    ChatMessage,
    ImageProvider,
    InferenceProvider,
    InferenceRequest,
    InferenceResult,
    ProviderConfigError,
    ProviderError,
    ProviderFactory,
    ProviderType,
    TokenUsage,
    ToolCall,
    ToolMessage,
    ToolSchema,
    UserMessage,
)
from claybot.sandbox import (
    MIB,
    CapturedOutput,
    ExecResult,
    ResourceLimits,
    Sandbox,
    SandboxConfig,
    SandboxMode,
    SandboxRunner,
    SandboxUnavailable,
)
from claybot.tools.base import AgentKind, ToolContext, ToolDefinition, ToolResult, ToolRun

__all__ = [
    "MIB",
    "SECRET",
    "AgentKind",
    "AssistantMessage",
    "Attachment",
    "AuthEntry",
    "Backoff",
    "CamelModel",
    "CapturedOutput",
    "ChatMessage",
    "Connector",
    "ExecResult",
    "FetchFailed",
    "FetchRefused",
    "FetchedPage",
    "FileMissing",
    "FileReference",
    "FileRefused",
    "ImageProvider",
    "InboundMessage",
    "InferenceProvider",
    "InferenceRequest",
    "InferenceResult",
    "InstanceNotFound",
    "McpServerSettings",
    "OutgoingMessage",
    "PermissionAlreadyDecided",
    "PermissionOutcome",
    "PermissionPrompt",
    "PermissionPrompter",
    "PermissionTagError",
    "Permissions",
    "PluginApi",
    "PluginAuthFailed",
    "PluginDefinition",
    "PluginError",
    "PluginInstance",
    "PluginNotReady",
    "PluginRegistrar",
    "PluginSettingsInvalid",
    "PostedMessage",
    "ProtectedPaths",
    "ProviderConfigError",
    "ProviderError",
    "ProviderFactory",
    "ProviderSettings",
    "ProviderType",
    "RegistrationError",
    "Resolve",
    "ResourceLimits",
    "Sandbox",
    "SandboxConfig",
    "SandboxMode",
    "SandboxRunner",
    "SandboxUnavailable",
    "TokenUsage",
    "ToolCall",
    "ToolContext",
    "ToolDefinition",
    "ToolMessage",
    "ToolResult",
    "ToolRun",
    "ToolSchema",
    "UrlFetcher",
    "UserMessage",
    "address_refusal",
    "atomic_write_json",
    "check_path",
    "granting_folder",
    "is_within",
    "open_beneath",
    "open_granted",
    "resolve_host",
]
