"""Running the checks (all, or the groups asked for) and applying the safe repairs."""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from claybot.config.home import PRIVATE_UMASK
from claybot.doctor.claude import check_claude
from claybot.doctor.configuration import check_config
from claybot.doctor.context import DoctorContext
from claybot.doctor.database import check_database
from claybot.doctor.disk import check_disk
from claybot.doctor.finding import Finding, fail
from claybot.doctor.groups import GROUPS
from claybot.doctor.home_files import check_home
from claybot.doctor.local_model import check_local_model
from claybot.doctor.port import check_port
from claybot.doctor.providers import check_providers
from claybot.doctor.sandbox import check_sandbox
from claybot.doctor.telegram import check_telegram

Check = Callable[[DoctorContext], list[Finding]]

CHECKS: dict[str, Check] = {
    "home": check_home,
    "config": check_config,
    "provider": check_providers,
    "local": check_local_model,
    "sandbox": check_sandbox,
    "port": check_port,
    "database": check_database,
    "claude": check_claude,
    "telegram": check_telegram,
    "disk": check_disk,
}
assert tuple(CHECKS) == GROUPS, "claybot.doctor.groups lists every check, in order"
# The checks wait on the network, a child process and the sandbox probe: side by side,
# the slowest sets the pace rather than their sum.
PARALLEL_CHECKS = len(CHECKS)


def run_checks(context: DoctorContext, groups: Iterable[str] | None = None) -> list[Finding]:
    wanted = set(GROUPS if groups is None else groups)
    chosen = [name for name in CHECKS if name in wanted]
    with ThreadPoolExecutor(PARALLEL_CHECKS, thread_name_prefix="doctor") as pool:
        results = pool.map(lambda name: _run_one(name, context), chosen)
        return [finding for findings in results for finding in findings]


def _run_one(name: str, context: DoctorContext) -> list[Finding]:
    try:
        return CHECKS[name](context)
    except Exception as exc:
        # A check that breaks is a finding too: the doctor itself must not fall over.
        where = traceback.extract_tb(exc.__traceback__)[-1]
        return [
            fail(
                name,
                f"the check itself failed: {type(exc).__name__}: {exc} "
                f"({os.path.basename(where.filename)}:{where.lineno})",
                f"claybot doctor --only {name} (again; if it persists, it is a bug in the doctor)",
            )
        ]


@dataclass(frozen=True)
class RepairOutcome:
    check: str
    done: str | None  # what the repair did
    error: str | None  # why it could not


def apply_repairs(findings: Iterable[Finding]) -> list[RepairOutcome]:
    """Apply every safe repair the findings offer, in check order, each once.

    What they create is the owner's alone, as what the engine creates is.
    """
    outcomes = []
    previous = os.umask(PRIVATE_UMASK)
    try:
        for finding in findings:
            if finding.status == "ok" or finding.repair is None:
                continue
            try:
                outcomes.append(RepairOutcome(finding.check, finding.repair(), None))
            except Exception as exc:
                outcomes.append(RepairOutcome(finding.check, None, f"{type(exc).__name__}: {exc}"))
    finally:
        os.umask(previous)
    return outcomes
