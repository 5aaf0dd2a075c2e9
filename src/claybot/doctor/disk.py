"""Free space on the home's file system: the engine writes histories, logs and the
database there, and a full disk stops it accepting messages."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

from claybot.doctor.context import MIB, DoctorContext
from claybot.doctor.finding import Finding, fail, ok, warn


def check_disk(context: DoctorContext) -> list[Finding]:
    home = context.paths.home
    where = _existing(home)
    usage = shutil.disk_usage(where)
    limits = context.limits
    detail = f"{_size(usage.free)} free of {_size(usage.total)} on the file system of {where}"
    fix = f"free space there: `du -xsh {shlex.quote(str(where))}/* | sort -h` shows what is big"
    if usage.free < limits.disk_fail_bytes:
        return [fail("disk", f"{detail} (under {_size(limits.disk_fail_bytes)})", fix)]
    if usage.free < limits.disk_warn_bytes:
        return [warn("disk", f"{detail} (under {_size(limits.disk_warn_bytes)})", fix)]
    return [ok("disk", detail)]


def _existing(path: Path) -> Path:
    """The path, or its nearest existing parent (a home not created yet)."""
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _size(size: int) -> str:
    if size >= 1024 * MIB:
        return f"{size / (1024 * MIB):.1f} GB"
    return f"{size / MIB:.0f} MB"
