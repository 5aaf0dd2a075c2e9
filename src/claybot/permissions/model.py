"""What an agent may touch: its working folder, read and write grants, network (seed 001).

It lives below the agents so the sandbox, the gates and the tools can reason about
grants without importing the runtime.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field


class Permissions(BaseModel):
    model_config = ConfigDict(extra="forbid")
    workingDir: str = ""
    readDirs: list[str] = Field(default_factory=list)
    writeDirs: list[str] = Field(default_factory=list)
    network: bool = False
