from __future__ import annotations

import os
from pathlib import Path

import pytest

from claybot.permissions.model import Permissions
from claybot.permissions.tags import (
    PermissionTag,
    PermissionTagError,
    apply_grant,
    check_path,
    granting_folder,
    grants,
    is_within,
    parse_tag,
    subset_of,
)


def test_parse_the_three_tags(tmp_path: Path) -> None:
    assert parse_tag("@network") == PermissionTag("network")
    assert parse_tag(f"@read:{tmp_path}") == PermissionTag("read", str(tmp_path.resolve()))
    assert str(parse_tag(f"@write:{tmp_path}/../{tmp_path.name}")) == f"@write:{tmp_path.resolve()}"


@pytest.mark.parametrize(
    "tag",
    [
        "@web",
        "@read:relative/path",
        "@write:",
        "@read:/a\x00b",
        "read:/tmp",
        "@read:/" + "a" * 5000,
    ],
)
def test_bad_tags_are_refused_with_a_reason(tag: str) -> None:
    with pytest.raises(PermissionTagError):
        parse_tag(tag)


def test_prefix_is_not_containment() -> None:
    assert is_within("/data/work", "/data/work") and is_within("/data/work/x", "/data/work")
    assert not is_within("/data/workshop", "/data/work")
    assert is_within("/anything", "/")


def test_write_implies_read_and_grants_are_idempotent() -> None:
    granted = apply_grant(Permissions(), PermissionTag("write", "/srv/out"))
    assert granted.writeDirs == ["/srv/out"] and granted.readDirs == ["/srv/out"]
    assert grants(granted, PermissionTag("read", "/srv/out/file.txt"))
    assert not grants(granted, PermissionTag("write", "/srv/other"))
    assert apply_grant(granted, PermissionTag("read", "/srv/out/sub")) == granted
    assert apply_grant(granted, PermissionTag("network")).network is True


def test_a_caller_can_pass_on_only_what_it_holds() -> None:
    holder = Permissions(writeDirs=["/srv"], readDirs=["/srv"])
    wanted = [
        PermissionTag("read", "/srv/a"),
        PermissionTag("write", "/etc"),
        PermissionTag("network"),
    ]
    assert subset_of(wanted, holder) == wanted[1:]


def test_symlinks_and_dotdot_cannot_escape_a_grant(tmp_path: Path) -> None:
    allowed = tmp_path / "allowed"
    secret = tmp_path / "secret"
    allowed.mkdir()
    secret.mkdir()
    (secret / "key.txt").write_text("s3cret")
    os.symlink(secret, allowed / "link")
    permissions = Permissions(readDirs=[str(allowed.resolve())], writeDirs=[])
    assert check_path(permissions, str(allowed / "notes.txt"), "read") == str(
        allowed.resolve() / "notes.txt"
    )
    with pytest.raises(PermissionError, match="request @read:"):
        check_path(permissions, str(allowed / "link" / "key.txt"), "read")
    with pytest.raises(PermissionError):
        check_path(permissions, f"{allowed}/../secret/key.txt", "read")
    with pytest.raises(PermissionError):
        check_path(permissions, str(allowed / "notes.txt"), "write")


def test_the_deepest_granted_folder_holds_a_path() -> None:
    permissions = Permissions(readDirs=["/data", "/data/ro/deep"], writeDirs=["/ws", "/ws/a"])
    assert granting_folder(permissions, "/ws/a/b/f.txt", "write") == "/ws/a"
    assert granting_folder(permissions, "/ws/ab/f.txt", "write") == "/ws"
    assert granting_folder(permissions, "/data/ro/deep/f", "read") == "/data/ro/deep"
    assert granting_folder(permissions, "/data/ro/deep/f", "write") is None
    assert granting_folder(permissions, "/etc/passwd", "read") is None


def test_a_path_that_changes_while_it_is_resolved_is_a_clear_error() -> None:
    def swapped_under_realpath(path: str) -> str:
        raise OSError(22, "Invalid argument", path)  # readlink on what is no longer a link

    permissions = Permissions(writeDirs=["/ws"])
    with pytest.raises(PermissionTagError, match="changed while it was resolved"):
        check_path(permissions, "/ws/race/f.txt", "write", resolve=swapped_under_realpath)
