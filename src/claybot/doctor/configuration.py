"""settings.json, auth.json and each plugin instance's settings, read as the engine reads
them: a file the engine would refuse is a failure carrying the loader's own error.

Also what the two files say together: a credential that no provider and no plugin
instance uses is what a setup stopped half-way leaves (the key saved, the provider or
the bot not), so it is named with the command that finishes the job.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from pydantic import ValidationError

from claybot.config.store import describe_validation_error
from claybot.doctor.context import DoctorContext
from claybot.doctor.finding import Finding, fail, ok, warn
from claybot.plugins import PluginCatalog
from claybot.plugins.telegram.plugin import PLUGIN_ID as TELEGRAM_PLUGIN


def check_config(context: DoctorContext) -> list[Finding]:
    paths = context.paths
    findings = [
        _file("config.settings", paths.settings, context.settings_error, "defaults apply"),
        _file("config.auth", paths.auth, context.auth_error, "no credentials stored"),
    ]
    if context.settings is not None:
        findings.append(_plugins(context))
        if context.auth is not None:
            findings.append(_credentials(context))
    return findings


def _file(check: str, path: Path, error: str | None, when_absent: str) -> Finding:
    if error is not None:
        return fail(check, error, f"${{EDITOR:-vi}} {shlex.quote(str(path))}")
    if not path.exists():
        return ok(check, f"{path.name} is absent: {when_absent}")
    return ok(check, f"{path.name} is valid")


def _plugins(context: DoctorContext) -> Finding:
    assert context.settings is not None
    entries = [entry for entry in context.settings.plugins if entry.enabled]
    if not entries:
        return ok("config.plugins", "no plugin instance is enabled")
    catalog = PluginCatalog.discover()
    problems: list[str] = []
    fixes: list[str] = []
    for entry in entries:
        definition = catalog.get(entry.plugin_id)
        if definition is None:
            problems.append(
                f"{entry.instance_id}: plugin {entry.plugin_id!r} is not installed "
                f"(installed: {', '.join(catalog.ids())})"
            )
            fixes.append(f"claybot plugins unload {entry.instance_id}")
            continue
        try:
            definition.settings_model.model_validate(entry.settings)
        except ValidationError as exc:
            problems.append(f"{entry.instance_id}: {describe_validation_error(exc)}")
            fixes.append(
                f"claybot plugins load {entry.plugin_id} --instance {entry.instance_id} "
                "--setting KEY=VALUE (see `claybot plugins info "
                f"{entry.plugin_id}`)"
            )
    broken = [f"{p.source}: {p.message}" for p in catalog.problems]
    if problems:
        return fail("config.plugins", "; ".join(problems + broken), "; ".join(fixes))
    names = ", ".join(f"{e.instance_id} ({e.plugin_id})" for e in entries)
    if broken:
        # Installed packages whose plugin cannot be used; none of them is configured.
        return warn(
            "config.plugins",
            f"settings valid for {names}; unusable plugin packages: {'; '.join(broken)}",
            "reinstall or uninstall those packages (pip install --force-reinstall NAME)",
        )
    return ok("config.plugins", f"settings valid for {names}")


def _credentials(context: DoctorContext) -> Finding:
    """Each auth.json entry is used: a provider reads the entry of its id, a plugin
    instance the entry of its instance id."""
    assert context.settings is not None and context.auth is not None
    users = {provider.id for provider in context.settings.providers}
    users |= {entry.instance_id for entry in context.settings.plugins}
    unused = [entry_id for entry_id in context.auth.root if entry_id not in users]
    if not unused:
        return ok("config.credentials", "every auth.json entry is used")
    problems: list[str] = []
    fixes: list[str] = []
    for entry_id in unused:
        if context.auth.has(entry_id, "token"):  # a plugin instance's (a bot token)
            problems.append(
                f"a token for {entry_id!r}, but no plugin instance {entry_id!r} in settings.json"
            )
            if entry_id == TELEGRAM_PLUGIN:
                fixes.append(
                    "claybot init (it connects the Telegram bot), or claybot plugins load "
                    f"telegram --setting allowedUserIds=[YOUR_TELEGRAM_ID], or claybot auth "
                    f"remove {entry_id}"
                )
            else:
                fixes.append(
                    f"claybot plugins load PLUGIN --instance {entry_id} --setting KEY=VALUE, "
                    f"or claybot auth remove {entry_id}"
                )
        else:
            problems.append(
                f"a key for {entry_id!r}, but no provider {entry_id!r} in settings.json"
            )
            fixes.append(
                f"claybot init, or claybot providers add {entry_id} (--type TYPE unless "
                f"{entry_id!r} is one), or claybot auth remove {entry_id}"
            )
    return warn(
        "config.credentials",
        "nothing uses what auth.json holds (a setup that stopped half-way?): "
        + "; ".join(problems),
        "; ".join(fixes),
    )
