"""The file store: what people and agents send each other, under ``<home>/files``.

Content-addressed: a file lives once, at ``blobs/<2 hex>/<sha256>``, however many
messages carry it. ``put`` writes it durably (temp file, fsync, rename, fsync the
folder) before it returns, so a message that references it is acknowledged only once
its files are safe. A file is capped in size, so is a message's total, and the store
as a whole has a quota; each refusal is a 413 with the limit and its setting named.

Nothing is deleted when a message goes: ``collect`` removes the files no history
references once they are older than ``files.collectAfterS`` (``collect.py`` finds the
references), so a file on its way into a history is never taken.

A stored file's bytes are the engine's alone: agents get copies (``placement.py``).
Engines before that placed hard links in the shared workspace, through which a tool
could change a stored file under its id; ``detach_links`` undoes that once.

Blocking I/O throughout: the engine calls it on a worker thread.
"""

from __future__ import annotations

import hashlib
import logging
import os
import secrets
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path

from claybot.config.settings import FileSettings
from claybot.durable.atomic import fsync_directory, write_all
from claybot.files.reference import SHA256, FileReference, safe_name
from claybot.files.sniff import sniff
from claybot.kernel.errors import ClayError, NotFound

log = logging.getLogger(__name__)

BLOBS = "blobs"
SNIFF_BYTES = 256 * 1024  # what ``sniff`` looks at, at most
PRIVATE_FILE = 0o600


class FileTooLarge(ClayError):
    code = "file_too_large"
    status = 413


class StoreFull(ClayError):
    code = "file_quota_exceeded"
    status = 413


class FileNotFound(NotFound):
    code = "file_not_found"


class FileStore:
    def __init__(self, root: Path, settings: FileSettings) -> None:
        self.root = root
        self.settings = settings
        self._lock = threading.Lock()
        self._used: int | None = None  # bytes stored, counted on first need

    # -- in -----------------------------------------------------------------------------

    def check_message(self, sizes: Iterable[int]) -> None:
        """A message's files together, against ``files.maxMessageBytes``."""
        total = sum(sizes)
        if total > self.settings.max_message_bytes:
            raise FileTooLarge(
                f"the message's files are {total} bytes; the limit is "
                f"{self.settings.max_message_bytes} (files.maxMessageBytes)",
                field="files",
            )

    def put(self, data: bytes, name: str) -> FileReference:
        """Store ``data`` (once: the same content again is the same file) and return
        its reference, durable on return."""
        limit = self.settings.max_file_bytes
        if len(data) > limit:
            raise FileTooLarge(
                f"{safe_name(name)!r} is {len(data)} bytes; the limit is {limit} "
                "(files.maxFileBytes)",
                field="file",
            )
        digest = hashlib.sha256(data).hexdigest()
        reference = FileReference(digest, safe_name(name), sniff(data), len(data))
        path = self._blob(digest)
        with self._lock:
            try:
                if path.stat().st_size == len(data):
                    return reference
                # Changed under its id (through a link an older engine placed): the
                # bytes that were sent are the file again.
                self._write(path, data)
                self._used = None  # counted again on next need
                return reference
            except FileNotFoundError:
                pass
            used = self._used_bytes()
            if used + len(data) > self.settings.quota_bytes:
                raise StoreFull(
                    f"the file store holds {used} bytes; {len(data)} more would pass its "
                    f"quota of {self.settings.quota_bytes} (files.quotaBytes)",
                    field="file",
                )
            self._write(path, data)
            self._used = used + len(data)
        return reference

    def _write(self, path: Path, data: bytes) -> None:
        folder = path.parent
        new_folder = not folder.exists()
        folder.mkdir(parents=True, exist_ok=True)
        temp = folder / f".{path.name}.{secrets.token_hex(4)}.tmp"
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, PRIVATE_FILE)
        try:
            write_all(fd, data)
            os.fsync(fd)
        except BaseException:
            os.close(fd)
            temp.unlink(missing_ok=True)
            raise
        os.close(fd)
        os.replace(temp, path)
        fsync_directory(folder)
        if new_folder:
            fsync_directory(folder.parent)

    # -- out ----------------------------------------------------------------------------

    def path_of(self, file_id: str) -> Path:
        """Where a stored file's bytes are (FileNotFound for an unknown id)."""
        if not SHA256.match(file_id):
            raise FileNotFound(f"no file {file_id!r}", field="fileId")
        path = self._blob(file_id)
        if not path.is_file():
            raise FileNotFound(f"no file {file_id!r}", field="fileId")
        return path

    def location(self, file_id: str) -> Path | None:
        """Where the bytes of a file with this id are kept, whether or not they are there
        (no disk access); None for what is no file id."""
        return self._blob(file_id) if SHA256.match(file_id) else None

    def reference(self, file_id: str, name: str) -> FileReference:
        """A stored file's reference under ``name``: its type sniffed again and its size
        read from the store, not taken from whoever names it."""
        path = self.path_of(file_id)
        with path.open("rb") as file:
            head = file.read(SNIFF_BYTES)
            size = os.fstat(file.fileno()).st_size
        return FileReference(file_id, safe_name(name), sniff(head), size)

    def read(self, file_id: str) -> bytes:
        return self.path_of(file_id).read_bytes()

    def exists(self, file_id: str) -> bool:
        return bool(SHA256.match(file_id)) and self._blob(file_id).is_file()

    # -- repair -------------------------------------------------------------------------

    def detach_links(self) -> tuple[int, int]:
        """Each stored file that shares its bytes with a link elsewhere (placed by an
        older engine) made a file of its own again, once its bytes are checked against
        its id; one whose bytes no longer match was changed through the link and is
        removed (an upload of the original stores it again). Returns (detached, removed)."""
        detached = removed = 0
        for path in self._blobs():
            try:
                if path.stat().st_nlink <= 1:
                    continue
                data = path.read_bytes()
            except FileNotFoundError:
                continue  # collected meanwhile
            with self._lock:
                if hashlib.sha256(data).hexdigest() == path.name:
                    self._write(path, data)  # a new file at the path; the links keep the old
                    detached += 1
                    continue
                path.unlink(missing_ok=True)
                self._used = None  # counted again on next need
            removed += 1
            log.error(
                "stored file %s was changed through a link in an agent's folder; removed",
                path.name,
                extra={"action": "files.blob_damaged", "fileId": path.name},
            )
        return detached, removed

    # -- collection ---------------------------------------------------------------------

    def collect(self, referenced: set[str], now: float | None = None) -> int:
        """Remove each file that no history references and that is older than
        ``files.collectAfterS``; the count removed."""
        cutoff = (time.time() if now is None else now) - self.settings.collect_after_s
        removed = 0
        for path in self._blobs():
            if path.name in referenced:
                continue
            with self._lock:
                try:
                    stat = path.stat()
                except FileNotFoundError:
                    continue
                if stat.st_mtime > cutoff or path.name in referenced:
                    continue
                path.unlink(missing_ok=True)
                if self._used is not None:
                    self._used -= stat.st_size
            removed += 1
        return removed

    def used_bytes(self) -> int:
        with self._lock:
            return self._used_bytes()

    def _used_bytes(self) -> int:
        if self._used is None:
            self._used = sum(path.stat().st_size for path in self._blobs())
        return self._used

    def _blobs(self) -> Iterator[Path]:
        root = self.root / BLOBS
        if not root.is_dir():
            return
        for folder in root.iterdir():
            if folder.is_dir():
                for path in folder.iterdir():
                    if SHA256.match(path.name):
                        yield path

    def _blob(self, digest: str) -> Path:
        return self.root / BLOBS / digest[:2] / digest
