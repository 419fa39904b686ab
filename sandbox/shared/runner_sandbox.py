"""What the container and pod sandboxes share: the agent's tools go to the tool runner, started on the first tool
call over one stream and used for the whole attempt. A backend says how the runner starts (`_start_runner`)."""

from __future__ import annotations

from sandbox.protocol import BuildError, SandboxError
from sandbox.shared.runner_client import RunnerClient


class RunnerSandbox:
    _runner: RunnerClient | None
    _closed: bool
    has_python: bool
    image: str

    @property
    def alive(self) -> bool:
        return not self._closed and not (self._runner is not None and self._runner.dead)

    @property
    def closed(self) -> bool:
        return self._closed

    async def run_tool(self, name: str, arguments: str | dict) -> str:
        return await (await self._client()).tool(name, arguments)

    async def _client(self) -> RunnerClient:
        if self._closed:
            raise SandboxError("sandbox is not running")
        if self._runner is None:
            if not self.has_python:  # a task error: the image cannot host the agent's tools
                raise BuildError(f"image {self.image} has no python3, which leafcost's tool runner needs for the "
                                 "agent's tools")
            await self._start_runner()
        assert self._runner is not None
        return self._runner

    async def _start_runner(self) -> None:
        raise NotImplementedError
