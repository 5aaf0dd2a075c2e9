"""The exec sandbox: bubblewrap works here (probed exactly as the engine probes it), and
no shell plugin instance runs agents' commands unconfined."""

from __future__ import annotations

import asyncio
import json
import shlex
from dataclasses import dataclass

from pydantic import ValidationError

from claybot.doctor.context import DoctorContext
from claybot.doctor.finding import Finding, fail, ok, warn
from claybot.plugins.builtin.shell import PLUGIN_ID as SHELL_PLUGIN
from claybot.plugins.builtin.shell import ShellSettings
from claybot.sandbox import Sandbox, SandboxSupport

INSTALL_BWRAP = "sudo apt-get install bubblewrap  (Fedora: dnf install bubblewrap)"
ALLOW_USER_NAMESPACES = "sudo sysctl -w kernel.unprivileged_userns_clone=1"


@dataclass(frozen=True)
class ShellInstance:
    instance_id: str
    raw: dict[str, object]
    settings: ShellSettings


def check_sandbox(context: DoctorContext) -> list[Finding]:
    shells = _shell_instances(context)
    return [_bwrap(context, shells), _exec(shells)]


def _shell_instances(context: DoctorContext) -> list[ShellInstance]:
    """Enabled shell instances whose settings load (config.plugins reports the others)."""
    if context.settings is None:
        return []
    found = []
    for entry in context.settings.plugins:
        if entry.enabled and entry.plugin_id == SHELL_PLUGIN:
            try:
                settings = ShellSettings.model_validate(entry.settings)
            except ValidationError:
                continue
            found.append(ShellInstance(entry.instance_id, entry.settings, settings))
    return found


def _bwrap(context: DoctorContext, shells: list[ShellInstance]) -> Finding:
    support, found = asyncio.run(_probe(context))
    if support.bwrap is not None:
        return ok(
            "sandbox.bwrap",
            f"bubblewrap ({support.bwrap}) confines commands; processes bounded by "
            f"{support.process_limit}",
        )
    # Gates and jobs' run_python refuse to run without it; an exec that needs it is broken.
    needing = [shell.instance_id for shell in shells if shell.settings.sandbox != "unconfined"]
    consequence = (
        f"exec of shell instance {', '.join(needing)} refuses to run, and so do gates and "
        "run_python"
        if needing
        else "exec, gates and run_python refuse to run commands"
    )
    report = fail if needing else warn
    fix = ALLOW_USER_NAMESPACES if found else INSTALL_BWRAP  # found: bwrap fails here
    return report("sandbox.bwrap", f"{support.problem}: {consequence}", fix)


async def _probe(context: DoctorContext) -> tuple[SandboxSupport, str | None]:
    """What the engine's probe finds here, and the bwrap on PATH (working or not)."""
    sandbox = Sandbox(context.paths.home, environ=context.env)
    try:
        return await sandbox.support(), sandbox.bwrap
    finally:
        await sandbox.close()  # the pids cgroup folder the probe may have made


def _exec(shells: list[ShellInstance]) -> Finding:
    unconfined = [shell for shell in shells if shell.settings.sandbox == "unconfined"]
    if unconfined:
        names = ", ".join(repr(shell.instance_id) for shell in unconfined)
        fixes = [
            f"claybot plugins load {SHELL_PLUGIN} --instance {shell.instance_id} "
            f"--settings-json {shlex.quote(json.dumps({**shell.raw, 'sandbox': 'auto'}))}"
            for shell in unconfined
        ]
        return warn(
            "sandbox.exec",
            f"UNCONFINED: shell instance {names} runs agents' commands with NO sandbox (its "
            "settings say sandbox: unconfined): they can read and write everything this "
            "user can, auth.json, the keys and the database included",
            " && ".join(fixes),
        )
    if not shells:
        return ok("sandbox.exec", "no shell plugin instance: agents run no commands but gates")
    names = ", ".join(shell.instance_id for shell in shells)
    return ok("sandbox.exec", f"exec of {names} runs only inside the sandbox")
