"""Per-command pids cgroups: two sandboxes in one process never reach for the same
folder, and a folder left behind (a killed command's, not yet released by the kernel)
is stepped over instead of failing the next command."""

from __future__ import annotations

from pathlib import Path

import pytest

from claybot.sandbox.cgroup import PidsCgroups, discover_pids_cgroups


@pytest.fixture
def cgroups() -> PidsCgroups:
    found, why = discover_pids_cgroups()
    if found is None:
        pytest.skip(f"this machine gives no pids cgroups to this process: {why}")
    return found


def test_two_sandboxes_in_one_process_and_a_leftover_folder_do_not_collide(
    cgroups: PidsCgroups,
) -> None:
    other = PidsCgroups(cgroups.parent, cgroups.version)  # a second sandbox, same process
    first = cgroups.create(8)
    second = other.create(8)
    assert first.path != second.path
    # A folder left where the next number would go is stepped over.
    number = int(second.path.name.removeprefix("cmd-"))
    leftover = cgroups.parent / f"cmd-{number + 1}"
    leftover.mkdir()
    try:
        third = cgroups.create(8)
        assert third.path not in (first.path, second.path, leftover)
        assert Path(third.path / "pids.max").read_text().strip() == "8"
        third.remove()
    finally:
        leftover.rmdir()
        first.remove()
        second.remove()
