"""The built-in plugins as this checkout's ``pyproject.toml`` declares them, for the tests.

The engine finds every plugin, the built-ins too, through the ``claybot.plugins``
entry points of the installed ``claybot`` distribution. An editable install keeps
the entry points of the ``pyproject.toml`` it was installed from: a checkout that
changed them and was not installed again (``make`` does it, as its stamp depends on
``pyproject.toml``; a worktree sharing another checkout's virtual environment never
does) would test stale metadata. Then, and only then, the tests put a ``claybot``
dist-info carrying this checkout's entry points first on the path, for themselves
and for the engines they start; importlib.metadata reads the first distribution of
a name, as the catalog does. After ``make`` this does nothing.
"""

from __future__ import annotations

import atexit
import importlib
import importlib.metadata
import os
import shutil
import sys
import tempfile
import tomllib
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
GROUP = "claybot.plugins"


def declared_entry_points(pyproject: Path = PYPROJECT) -> dict[str, str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    declared: dict[str, str] = project.get("entry-points", {}).get(GROUP, {})
    return declared


def _entry_points_txt(groups: dict[str, dict[str, str]]) -> str:
    lines: list[str] = []
    for group, entries in groups.items():
        lines += [f"[{group}]", *(f"{name} = {value}" for name, value in entries.items()), ""]
    return "\n".join(lines)


def installed_entry_points() -> dict[str, str] | None:
    try:
        dist = importlib.metadata.distribution("claybot")
    except importlib.metadata.PackageNotFoundError:
        return None
    return {ep.name: ep.value for ep in dist.entry_points if ep.group == GROUP}


def use_declared_entry_points() -> Path | None:
    """The folder put first on the path, or None when the installed metadata is current."""
    declared = declared_entry_points()
    if installed_entry_points() == declared:
        return None
    site = Path(tempfile.mkdtemp(prefix="claybot-test-metadata-"))
    atexit.register(shutil.rmtree, site, ignore_errors=True)
    dist_info = site / "claybot-0+checkout.dist-info"
    dist_info.mkdir()
    (dist_info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: claybot\nVersion: 0+checkout\n"
    )
    scripts = tomllib.loads(PYPROJECT.read_text())["project"].get("scripts", {})
    groups = {"console_scripts": scripts, GROUP: declared}
    (dist_info / "entry_points.txt").write_text(_entry_points_txt(groups))
    sys.path.insert(0, str(site))
    importlib.invalidate_caches()
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [str(site), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    return site
