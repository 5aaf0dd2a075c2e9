"""Builds ClayBot's one C extension, ``claybot/kernel/_free_pools.c``, into its wheel.

The extension hands the pages of CPython's free memory pools back to the operating
system (``kernel/memory.py``). ClayBot runs without it, with more memory kept after a
load, so a machine without a C compiler or Python's headers gets a warning, not a
failed install. It is built on Linux only, where it has been measured.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface

SOURCE = Path("src/claybot/kernel/_free_pools.c")
PACKAGE_FOLDER = "claybot/kernel"


class CustomBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        self._scratch: str | None = None
        if self.target_name != "wheel" or not sys.platform.startswith("linux"):
            return
        name = "_free_pools" + str(sysconfig.get_config_var("EXT_SUFFIX"))
        if version == "editable":
            # An editable install imports from src/: the module goes beside its source.
            output = Path(self.root) / SOURCE.parent / name
        else:
            self._scratch = tempfile.mkdtemp(prefix="claybot-build-")
            output = Path(self._scratch) / name
        if not self._compile(Path(self.root) / SOURCE, output):
            return
        if version != "editable":
            build_data["force_include"][str(output)] = f"{PACKAGE_FOLDER}/{name}"
        build_data["pure_python"] = False
        build_data["infer_tag"] = True

    def finalize(self, version: str, build_data: dict[str, Any], artifact_path: str) -> None:
        if self._scratch is not None:
            shutil.rmtree(self._scratch, ignore_errors=True)

    def _compile(self, source: Path, output: Path) -> bool:
        compiler = shlex.split(os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc")
        command = [
            *compiler,
            "-O2",
            "-fPIC",
            "-shared",
            f"-I{sysconfig.get_paths()['include']}",
            str(source),
            "-o",
            str(output),
        ]
        try:
            result = subprocess.run(command, capture_output=True, text=True, check=False)
            problem = (result.stderr.strip() or "the compiler failed") if result.returncode else ""
        except OSError as exc:
            problem = str(exc)
        if problem:
            self.app.display_warning(
                f"claybot: {source.name} was not built ({problem}); "
                "ClayBot works without it, but keeps more memory after a load"
            )
            return False
        return True
