"""A job's files, in the database so a worker on any machine can read and write them:
``job_attachments`` (uploaded for a job) and ``job_artifacts`` (written by one)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from typing import Any

from sqlalchemy import Connection, and_, insert, select

from claybot.db.errors import wrap_database_errors
from claybot.db.tables import job_artifacts, job_attachments
from claybot.jobs.fenced import write_fenced
from claybot.jobs.model import Claim, InvalidJobState, Owner, StoredFile
from claybot.jobs.port import NO_CHECKPOINT, NewArtifact
from claybot.jobs.sql import JobTables, at
from claybot.jobs.writer import Events
from claybot.kernel.errors import InvalidInput, NotFound


class JobFiles:
    def __init__(self, tables: JobTables) -> None:
        self._db = tables

    def _check_size(self, content: bytes, field: str) -> None:
        if len(content) > self._db.max_file_bytes:
            raise InvalidInput(
                f"the file is {len(content)} bytes; at most {self._db.max_file_bytes} are kept",
                field=field,
                code="FILE_TOO_LARGE",
            )

    def new_artifact(self, filename: str, content: bytes, mime_type: str | None) -> NewArtifact:
        """An artifact to store with a checkpoint (``JobTranscript.stage_artifact``),
        refused here if it is over the size cap."""
        self._check_size(content, "content")
        return NewArtifact(filename, mime_type, content, self._db.clock())

    async def put_artifact(
        self,
        claim: Claim,
        filename: str,
        content: bytes,
        mime_type: str | None,
    ) -> StoredFile:
        """Store an artifact at once (``run_python``'s files); written again under its
        name, it is replaced."""
        artifact = self.new_artifact(filename, content, mime_type)
        artifact_id = await write_fenced(
            self._db, "storing an artifact", claim, replace(NO_CHECKPOINT, artifact=artifact)
        )
        assert artifact_id is not None
        created_at = artifact.created_at
        return StoredFile(artifact_id, claim.job.id, filename, mime_type, len(content), created_at)

    async def artifacts(self, job_id: str, *, content: bool = False) -> list[StoredFile]:
        return await self._files(job_artifacts, job_artifacts.c.job_id == job_id, content=content)

    async def artifact(self, job_id: str, artifact_id: str) -> StoredFile:
        found = await self._files(
            job_artifacts,
            and_(job_artifacts.c.job_id == job_id, job_artifacts.c.id == artifact_id),
            content=True,
        )
        if not found:
            raise NotFound(f"job {job_id} has no artifact {artifact_id!r}")
        return found[0]

    async def add_attachment(
        self,
        filename: str,
        content: bytes,
        mime_type: str | None,
        *,
        owner: Owner,
        viewer: Owner,
        job_id: str | None = None,
    ) -> StoredFile:
        """An upload by ``owner`` (a key id, None for the engine's owner), attached to a
        job ``viewer`` may see (a key's own; every job for admin and the owner), or kept
        for the next job the uploader creates."""
        self._check_size(content, "file")
        now = self._db.clock()
        attachment_id = str(uuid.uuid4())
        storage_path = f"attachments/{job_id or 'unattached'}/{attachment_id}/{filename}"

        def write(connection: Connection, _events: Events) -> None:
            if job_id is not None:
                job = self._db.locked(connection, job_id, viewer)
                if job.terminal:
                    raise InvalidJobState(f"job {job_id} is {job.status.value}")
            connection.execute(
                insert(job_attachments).values(
                    id=attachment_id,
                    job_id=job_id,
                    api_key_id=owner,
                    filename=filename,
                    mime_type=mime_type,
                    content=content,
                    size_bytes=len(content),
                    storage_path=storage_path,
                    created_at=now,
                )
            )

        await self._db.write("storing an upload", write, job_id=job_id)
        return StoredFile(
            attachment_id, job_id, filename, mime_type, len(content), now, None, storage_path
        )

    async def attachments(self, job_id: str, *, content: bool = False) -> list[StoredFile]:
        return await self._files(
            job_attachments, job_attachments.c.job_id == job_id, content=content
        )

    async def _files(self, table: Any, where: Any, *, content: bool = False) -> list[StoredFile]:
        columns = [
            table.c.id,
            table.c.job_id,
            table.c.filename,
            table.c.mime_type,
            table.c.size_bytes,
            table.c.created_at,
        ]
        if content:
            columns.append(table.c.content)
        async with (
            wrap_database_errors("reading job files"),
            self._db.engine.connect() as connection,
        ):
            rows = await connection.execute(
                select(*columns).where(where).order_by(table.c.created_at, table.c.id)
            )
            return [
                StoredFile(
                    row.id,
                    row.job_id,
                    row.filename,
                    row.mime_type,
                    row.size_bytes,
                    at(row.created_at),
                    bytes(row.content) if content else None,
                )
                for row in rows
            ]
