"""``open_beneath``: a checked path opened without following a link at any level."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from claybot.permissions.safe_open import LinkRefused, open_beneath


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    base = tmp_path.resolve()
    (base / "grant" / "a" / "b").mkdir(parents=True)
    (base / "grant" / "a" / "b" / "f.txt").write_text("inside")
    (base / "outside").mkdir()
    (base / "outside" / "f.txt").write_text("outside")
    return base


def read(root: Path, path: Path) -> str:
    with os.fdopen(open_beneath(str(root), str(path), os.O_RDONLY), "r") as handle:
        return handle.read()


def test_a_real_path_opens(tree: Path) -> None:
    assert read(tree / "grant", tree / "grant" / "a" / "b" / "f.txt") == "inside"


@pytest.mark.parametrize("swapped", ["grant", "grant/a", "grant/a/b", "grant/a/b/f.txt"])
def test_a_link_at_any_level_is_refused(tree: Path, swapped: str) -> None:
    """Each level in turn becomes a link to the same place outside: none is followed."""
    victim = tree / swapped
    victim.rename(tree / "moved")
    target = tree / "outside" / ("f.txt" if swapped.endswith(".txt") else "")
    os.symlink(target, victim)
    # The path outside that each link would lead to holds a file of the same name.
    (tree / "outside" / "a" / "b").mkdir(parents=True)
    (tree / "outside" / "a" / "b" / "f.txt").write_text("outside")
    (tree / "outside" / "b").mkdir()
    (tree / "outside" / "b" / "f.txt").write_text("outside")
    path = tree / "grant" / "a" / "b" / "f.txt"
    with pytest.raises(LinkRefused, match=f"^{victim} was a symbolic link"):
        read(tree / "grant", path)
    with pytest.raises(LinkRefused):
        open_beneath(str(tree / "grant"), str(path), os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
    outside = sorted(str(p.relative_to(tree)) for p in (tree / "outside").rglob("*"))
    assert outside == [
        "outside/a",
        "outside/a/b",
        "outside/a/b/f.txt",
        "outside/b",
        "outside/b/f.txt",
        "outside/f.txt",
    ]
    assert {p.read_text() for p in (tree / "outside").rglob("f.txt")} == {"outside"}


def test_missing_folders_are_made_below_the_root_only(tree: Path) -> None:
    root = tree / "grant"
    path = root / "new" / "deeper" / "g.txt"
    fd = open_beneath(str(root), str(path), os.O_WRONLY | os.O_CREAT, make_folders=True)
    os.close(fd)
    assert path.is_file()
    # The root itself is the grant: it is not made when missing, nor anything above it.
    missing = tree / "absent"
    with pytest.raises(FileNotFoundError, match=str(missing)):
        open_beneath(str(missing), str(missing / "g"), os.O_WRONLY | os.O_CREAT, make_folders=True)
    assert not missing.exists()
    # Without make_folders nothing is made.
    with pytest.raises(FileNotFoundError, match=str(root / "other")):
        open_beneath(str(root), str(root / "other" / "g.txt"), os.O_WRONLY | os.O_CREAT)
    assert not (root / "other").exists()


def test_only_regular_files_open_and_a_fifo_does_not_block(tree: Path) -> None:
    fifo = tree / "grant" / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(OSError, match="not a regular file"):
        read(tree / "grant", fifo)
    with pytest.raises(OSError, match="not a regular file"):
        read(tree / "grant", tree / "grant" / "a")


def test_a_file_where_a_folder_should_be_is_named(tree: Path) -> None:
    path = tree / "grant" / "a" / "b" / "f.txt" / "x"
    with pytest.raises(NotADirectoryError, match=str(tree / "grant" / "a" / "b" / "f.txt")):
        read(tree / "grant", path)


@pytest.mark.parametrize(
    ("root", "path"),
    [("/grant", "/elsewhere/f.txt"), ("/grant", "/grant/../etc/passwd"), ("/grant", "rel.txt")],
)
def test_a_path_not_resolved_inside_the_root_is_a_programming_error(root: str, path: str) -> None:
    with pytest.raises(ValueError):
        open_beneath(root, path, os.O_RDONLY)
