"""The agent's way to the active controller: the SlurmctldHost= lines, tried in order.

With one controller the agent calls its stub directly. With backups, :class:`FailoverStub` stands in
for the stub: a call goes to the controller that answered last, and one that finds it UNAVAILABLE
(nothing listens there: it died or stands by, or it lost the lease and refused) goes to the others
in SlurmctldHost= order, the first that answers becoming the one asked next; so does a call that
got no answer in time (DEADLINE_EXCEEDED: a controller cut off from its database, about to stop). The agent's calls
(registration, heartbeats, job and step ends) may be sent again: the controller reconciles them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

import grpc

from pslurm.core.config import ClusterConfig
from pslurm.proto import pslurm_pb2_grpc as pb_grpc

log = logging.getLogger("psd")
# A channel to a controller that was down (or standing by) waits this long at most before it connects
# again: gRPC's default backoff grows to two minutes, and fails calls fast meanwhile, which would keep
# an agent from a backup that has just taken over.
# A call that ends so goes to the next controller: nothing listens (dead, or standing by), it lost the
# lease (its refusal), or it did not answer in time (its database is cut off: it stops serving soon).
PASS_ON = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
RECONNECT = [("grpc.initial_reconnect_backoff_ms", 200), ("grpc.min_reconnect_backoff_ms", 200),
             ("grpc.max_reconnect_backoff_ms", 1000)]


def controller_stub(config: ClusterConfig) -> Any:
    """The Controller stub the agent calls: the one controller's, or a FailoverStub over all of them."""
    targets = [f"{addr}:{config.controller_port}" for _, addr in config.controller_hosts]
    if len(targets) == 1:
        return pb_grpc.ControllerStub(grpc.insecure_channel(targets[0]))
    return FailoverStub(targets)


class FailoverStub:
    """A Controller stub over several controllers (see the module's docstring)."""

    def __init__(self, targets: list[str]) -> None:
        self.targets = targets
        self._stubs = [pb_grpc.ControllerStub(grpc.insecure_channel(t, options=RECONNECT)) for t in targets]
        self._current = 0  # the controller that answered last
        self._lock = threading.Lock()

    def __getattr__(self, method: str) -> Callable[..., Any]:
        def call(request: Any, **kwargs: Any) -> Any:
            first = self._current
            order = [first, *(i for i in range(len(self._stubs)) if i != first)]
            for place, i in enumerate(order):
                try:
                    reply = getattr(self._stubs[i], method)(request, **kwargs)
                except grpc.RpcError as exc:
                    code = exc.code() if isinstance(exc, grpc.Call) else None
                    if code not in PASS_ON or place == len(order) - 1:
                        raise
                    continue
                if i != first:
                    with self._lock:
                        self._current = i
                    log.info("the active controller is now %s", self.targets[i])
                return reply
            raise AssertionError("unreachable")

        return call
