"""sstat's call to the agents: ``JobStats`` on each node of a running job, at once, over grpc.aio on the
API's loop (nodeagent/stepstats.py answers it). The controller calls with its own credential, so the
API checks that the caller may see the job first."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any

import grpc
import grpc.aio

from pslurm.auth.transport import Metadata
from pslurm.proto import pslurm_pb2 as pb
from pslurm.proto import pslurm_pb2_grpc as pb_grpc

CALL_TIMEOUT = 10.0  # seconds: an agent reads /proc for the job's processes, a few milliseconds


class StatsRelay:
    """One grpc.aio channel per agent, made on (and used only from) the API's loop."""

    def __init__(self, credentials: Callable[[str], Metadata]) -> None:
        self._credentials = credentials  # fresh metadata for a call to that agent (a credential made for it)
        self._channels: dict[str, grpc.aio.Channel] = {}

    async def job_stats(self, targets: Sequence[str], job_id: int) -> list[dict[str, Any]]:
        """Each node's reply as JSON (``error`` in place of the figures for a node that did not answer)."""
        return list(await asyncio.gather(*(self._one(target, job_id) for target in targets)))

    async def _one(self, target: str, job_id: int) -> dict[str, Any]:
        channel = self._channels.get(target)
        if channel is None:
            channel = self._channels[target] = grpc.aio.insecure_channel(target)
        try:
            reply = await pb_grpc.NodeAgentStub(channel).JobStats(
                pb.JobStatsRequest(job_id=job_id), metadata=self._credentials(target), timeout=CALL_TIMEOUT)
        except grpc.aio.AioRpcError as exc:
            return {"target": target, "error": exc.details() or exc.code().name}
        return {"node": reply.node, "target": target,
                "memory_kb": reply.memory_kb if reply.HasField("memory_kb") else None,
                "cpu_seconds": reply.cpu_seconds if reply.HasField("cpu_seconds") else None,
                "gpus": [{"index": g.index, "memory_used_mb": g.memory_used_mb, "util": g.util} for g in reply.gpus],
                "tasks": [{"step": t.step, "rank": t.rank, "pid": t.pid, "cpu_seconds": t.cpu_seconds,
                           "rss_kb": t.rss_kb, "vmsize_kb": t.vmsize_kb, "pages": t.pages,
                           "read_bytes": t.read_bytes, "write_bytes": t.write_bytes, "pids": list(t.pids)}
                          for t in reply.tasks]}

    async def close(self) -> None:
        for channel in self._channels.values():
            await channel.close()
        self._channels.clear()
