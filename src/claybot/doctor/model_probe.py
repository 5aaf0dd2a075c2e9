"""``python -m claybot.doctor.model_probe GGUF N_CTX``: import llama.cpp and load the model.

Run by ``claybot doctor`` in a child process with a timeout, because a llama.cpp
built for instructions this CPU lacks dies of SIGILL, and a broken file can take
the process down: the doctor reports that instead of dying with it. Prints one JSON
line: ``{"stage": "import" | "load" | "loaded", "error": ..., "version": ...}``.
"""

from __future__ import annotations

import json
import sys
import time


def main(argv: list[str]) -> int:
    path, n_ctx = argv[0], int(argv[1])
    try:
        import llama_cpp
    except Exception as exc:  # ImportError, or a shared library that fails to load
        return _report("import", f"{type(exc).__name__}: {exc}")
    version = str(getattr(llama_cpp, "__version__", "?"))
    started = time.monotonic()
    try:
        model = llama_cpp.Llama(model_path=path, n_ctx=n_ctx, verbose=False)
    except Exception as exc:
        return _report("load", f"{type(exc).__name__}: {exc}", version)
    seconds = time.monotonic() - started
    model.close()
    return _report("loaded", None, version, seconds)


def _report(
    stage: str, error: str | None, version: str | None = None, seconds: float | None = None
) -> int:
    print(json.dumps({"stage": stage, "error": error, "version": version, "seconds": seconds}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
