"""``claybot doctor``: check the home and the machine, and say how to fix what is wrong.

The checks live in ``claybot.doctor`` (they print nothing); this shows their findings
as a list or as JSON, applies the safe repairs with ``--fix``, and exits 1 when a
check fails (warnings exit 0), so scripts and CI can gate on it.
"""

from __future__ import annotations

import logging
import os
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from claybot.cli.common import (
    HomeOption,
    JsonOption,
    console,
    err_console,
    fail,
    paths_for,
    print_json,
)
from claybot.doctor.groups import GROUPS

if TYPE_CHECKING:
    from claybot.doctor.checkup import RepairOutcome
    from claybot.doctor.finding import Finding

MARKS = {
    "ok": "[green]✓ ok  [/green]",
    "warn": "[yellow]! warn[/yellow]",
    "fail": "[red]✗ fail[/red]",
}


def doctor(
    home: HomeOption = None,
    fix: Annotated[
        bool,
        typer.Option(
            "--fix",
            help="Apply the safe fixes (tighten file modes, create missing home folders, "
            "migrate the SQLite database), then check again. Never deletes data or changes "
            "a key.",
        ),
    ] = False,
    as_json: JsonOption = False,
    only: Annotated[
        list[str] | None,
        typer.Option(
            "--only",
            help=f"Run only this group of checks; repeatable. One of: {', '.join(GROUPS)}.",
            show_default=False,
        ),
    ] = None,
    disk_warn_mb: Annotated[
        int, typer.Option("--disk-warn-mb", min=0, help="Warn when the home's disk has less free.")
    ] = 1024,
    disk_fail_mb: Annotated[
        int, typer.Option("--disk-fail-mb", min=0, help="Fail when the home's disk has less free.")
    ] = 100,
    timeout_s: Annotated[
        float,
        typer.Option(
            "--timeout", min=0.1, help="Seconds each network probe (endpoint, port) may take."
        ),
    ] = 3.0,
) -> None:
    """Check this home and machine; print each finding (ok, warn, fail) and its fix.

    home: folders exist, nobody else can read the home or its secrets.
    config: settings.json, auth.json, plugin settings (the engine's loaders).
    provider: each enabled provider's key; its endpoint answers (no model call).
    local: the GGUF; llama.cpp loads it (in a child process); the CPU's flags.
    sandbox: bubblewrap works; a LOUD warning when exec runs unconfined.
    port: engine.port is free, or held by this home's engine.
    database: SQLite integrity and schema, or PostgreSQL reachable and current.
    claude: on PATH (proactive agents run it). telegram: tokens pass getMe.
    disk: free space on the home's file system.

    Works with the engine running or not. Exits 1 when a check fails (warnings
    exit 0). $CLAYBOT_CPUINFO: read CPU flags from this file, not /proc/cpuinfo.
    """
    from claybot.doctor.checkup import apply_repairs, run_checks
    from claybot.doctor.context import MIB, Limits, load_context

    unknown = sorted(set(only or ()) - set(GROUPS))
    if unknown:
        fail(f"unknown check {', '.join(unknown)}: choose from {', '.join(GROUPS)}")
    if disk_fail_mb > disk_warn_mb:
        fail(f"--disk-fail-mb ({disk_fail_mb}) must not exceed --disk-warn-mb ({disk_warn_mb})")
    # The findings say everything; the parts the checks reuse (the sandbox probe, the
    # plugin catalog) would otherwise also log their warnings on stderr.
    logging.getLogger("claybot").addHandler(logging.NullHandler())
    logging.getLogger("claybot").propagate = False
    paths = paths_for(home)
    limits = Limits(
        disk_warn_bytes=disk_warn_mb * MIB,
        disk_fail_bytes=disk_fail_mb * MIB,
        probe_timeout_s=timeout_s,
    )
    env = dict(os.environ)
    findings = run_checks(load_context(paths, env, limits), only)
    repairs: list[RepairOutcome] = []
    if fix:
        repairs = apply_repairs(findings)
        if repairs:  # settings or auth did not change, but files did: read everything again
            findings = run_checks(load_context(paths, env, limits), only)
    failed = [finding.check for finding in findings if finding.status == "fail"]
    if as_json:
        # One object, as every --json: ok is false exactly when the exit code is 1.
        report: dict[str, Any] = {"ok": not failed}
        if failed:
            report["error"] = {"code": "checks_failed", "message": f"failed: {', '.join(failed)}"}
        report["findings"] = [finding.to_dict() for finding in findings]
        print_json(report)
    else:
        _show(findings, repairs, fix)
    if failed:
        raise typer.Exit(1)


def _show(findings: list[Finding], repairs: list[RepairOutcome], fix: bool) -> None:
    for outcome in repairs:
        if outcome.error is None:
            console.print(
                f"[green]fixed[/green] {escape(outcome.check)}: {escape(str(outcome.done))}"
            )
        else:
            err_console.print(
                f"[red]could not fix[/red] {escape(outcome.check)}: {escape(outcome.error)}"
            )
    if fix and not repairs:
        console.print("nothing to fix safely")
    width = max((len(finding.check) for finding in findings), default=0)
    for finding in findings:
        # One line each, not cut to the terminal: a detail or a command is read (and
        # copied) whole, and the terminal wraps it.
        console.print(
            f"{MARKS[finding.status]}  {escape(finding.check.ljust(width))}  "
            f"{escape(finding.detail)}",
            highlight=False,
            soft_wrap=True,
        )
        if finding.fix:
            console.print(
                f"{' ' * (10 + width)}[bold]fix:[/bold] {escape(finding.fix)}",
                highlight=False,
                soft_wrap=True,
            )
    for finding in findings:
        if finding.check == "sandbox.exec" and finding.status != "ok":
            # Loud on purpose: one line among many is easy to skim past.
            console.print(f"[bold red]WARNING: {escape(finding.detail)}[/bold red]")
    counts = {
        status: sum(f.status == status for f in findings) for status in ("ok", "warn", "fail")
    }
    console.print(
        f"{counts['ok']} ok, {counts['warn']} warning(s), {counts['fail']} failure(s)"
        + ("" if counts["fail"] or counts["warn"] else ": all good")
    )
    repairable = [f.check for f in findings if f.repair is not None and f.status != "ok"]
    if repairable and not fix:
        console.print(f"`claybot doctor --fix` fixes {', '.join(repairable)} safely")
