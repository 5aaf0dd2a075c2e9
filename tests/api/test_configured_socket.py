"""The socket settings.json's engine.socketPath names: bound beside the home's, safely."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from claybot.server.listeners import SocketPathTaken, bind_configured_socket


@pytest.fixture
def folder() -> Iterator[Path]:
    # Unix socket paths are limited to ~107 bytes; pytest's tmp paths can be long.
    path = Path(f"/tmp/cb-sock-{os.getpid()}")
    path.mkdir(exist_ok=True)
    yield path
    for child in path.iterdir():
        child.unlink()
    path.rmdir()


def test_a_new_path_is_bound_private_in_a_private_folder(folder: Path) -> None:
    path = folder / "sub" / "claybot.sock"
    with contextlib.closing(bind_configured_socket(path)):
        assert stat.S_ISSOCK(path.stat().st_mode)
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    path.unlink()
    path.parent.rmdir()


def test_a_file_at_the_path_is_never_removed(folder: Path) -> None:
    path = folder / "claybot.sock"
    path.write_text("not a socket")
    with pytest.raises(SocketPathTaken):
        bind_configured_socket(path)
    assert path.read_text() == "not a socket"


def test_a_socket_another_process_serves_is_left_alone(folder: Path) -> None:
    path = folder / "claybot.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as other:
        other.bind(str(path))
        other.listen(1)
        with pytest.raises(SocketPathTaken):
            bind_configured_socket(path)
        inode = path.stat().st_ino
    assert path.stat().st_ino == inode


def test_a_stale_socket_is_replaced(folder: Path) -> None:
    path = folder / "claybot.sock"
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as crashed:
        crashed.bind(str(path))  # bound, never listening: nobody answers
    with contextlib.closing(bind_configured_socket(path)) as bound:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as client:
            client.connect(str(path))
        assert bound.fileno() >= 0
