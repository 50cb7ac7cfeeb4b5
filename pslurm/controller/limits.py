"""The bounds an operator sets on what users' requests may take of psctld (pslurm.conf), with their defaults.

Slurm's words where Slurm has them: ``SlurmctldParameters=conmgr_max_connections=N,
conmgr_read_timeout=S,conmgr_threads=N`` (Slurm 23.11's connection manager) and
``rl_enable,rl_bucket_size=N,rl_refill_rate=N,rl_refill_period=S`` (Slurm 23.02's per-user RPC rate
limit, off by default as there). pslurm's own keys where Slurm has none: ``MaxRequestsPerUser``
(requests in flight), ``MaxStreamsPerUser`` (waits, output and input streams open),
``AuthCredentialRate`` (credentials a second from the credential socket); and Slurm's
``MaxTasksPerNode`` (a step's tasks on a node). See docs/security.md.
"""

from __future__ import annotations

import os
import resource
from dataclasses import dataclass

from pslurm.auth.transport import CREDENTIAL_RATE
from pslurm.core.config import ClusterConfig, ConfigError

MAX_TASKS_PER_NODE = 512  # Slurm's MaxTasksPerNode default: a step's tasks on one node, overcommitted or not
FD_RESERVE = 256  # descriptors kept for the store, the agents' channels, logs (a quarter, under a low limit)


@dataclass(frozen=True)
class ServerLimits:
    max_connections: int = 1024  # conmgr_max_connections: open connections to the API at once
    read_timeout: float = 10.0  # conmgr_read_timeout: seconds for a request's head, and for its body
    threads: int = 8  # conmgr_threads: threads for the API's blocking work (store, conversions)
    requests_per_user: int = 32  # MaxRequestsPerUser: one user's requests in flight (not counting streams)
    streams_per_user: int = 256  # MaxStreamsPerUser: one user's waits and output/input streams open
    credential_rate: int = CREDENTIAL_RATE  # AuthCredentialRate: credentials a second per uid, from the socket
    rate_limit: bool = False  # rl_enable: a token bucket per user on every request
    bucket_size: int = 30  # rl_bucket_size: requests a user may make at once
    refill_rate: int = 2  # rl_refill_rate: tokens added each refill period
    refill_period: float = 1.0  # rl_refill_period: seconds

    @property
    def threads_per_user(self) -> int:
        """The API's threads one user's requests may hold at once: never all of them."""
        return max(1, self.threads // 2)


def server_limits(config: ClusterConfig) -> ServerLimits:
    """The limits pslurm.conf sets (keys of ``config.extra``, case-insensitive); ConfigError names a bad one."""
    kv = {k.lower(): v for k, v in config.extra.items()}
    values: dict[str, object] = {}
    for key, attr in (("maxrequestsperuser", "requests_per_user"), ("maxstreamsperuser", "streams_per_user"),
                      ("authcredentialrate", "credential_rate")):
        if key in kv:
            values[attr] = _positive(config.path, key, kv[key])
    names = {"conmgr_max_connections": "max_connections", "conmgr_read_timeout": "read_timeout",
             "conmgr_threads": "threads", "rl_bucket_size": "bucket_size", "rl_refill_rate": "refill_rate",
             "rl_refill_period": "refill_period"}
    for item in filter(None, kv.get("slurmctldparameters", "").split(",")):
        name, _, value = item.strip().partition("=")
        name = name.lower()
        if name == "rl_enable":
            values["rate_limit"] = True
        elif name in names:
            values[names[name]] = _positive(config.path, f"SlurmctldParameters {name}", value)
        # others are Slurm's that pslurm does not use: kept, as unknown keys are
    limits = ServerLimits(**values)  # type: ignore[arg-type]
    return _within_descriptors(limits)


def max_tasks_per_node(config: ClusterConfig) -> int:
    """MaxTasksPerNode (Slurm's key, default 512): a step's tasks on one node, with -O/--overcommit too."""
    text = next((v for k, v in config.extra.items() if k.lower() == "maxtaskspernode"), "")
    return _positive(config.path, "MaxTasksPerNode", text) if text else MAX_TASKS_PER_NODE


def _positive(path: str, key: str, text: str) -> int:
    if not (text.isascii() and text.isdigit() and 0 < int(text) <= 10**7):
        raise ConfigError(f"{path}: {key}={text}: expected a whole number from 1 to 10000000")
    return int(text)


def raise_descriptor_limit() -> int:
    """psctld's soft limit on open files raised to its hard one (as slurmctld does); the limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = hard if hard != resource.RLIM_INFINITY else 1 << 20
    if soft == resource.RLIM_INFINITY or soft >= target:
        return soft if soft != resource.RLIM_INFINITY else target
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
        return target
    except (OSError, ValueError):
        return soft


def _within_descriptors(limits: ServerLimits) -> ServerLimits:
    """The connection limit under the process's descriptors: psctld refuses connections past it, so
    it never runs out of descriptors (accept() failing with EMFILE, and all that fails with it)."""
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    soft = soft if soft != resource.RLIM_INFINITY else 1 << 20
    room = soft - min(FD_RESERVE, soft // 4) - _open_descriptors()
    if limits.max_connections <= room:
        return limits
    return ServerLimits(**{**vars(limits), "max_connections": max(16, room)})


def _open_descriptors() -> int:
    try:
        return len(os.listdir("/proc/self/fd"))
    except OSError:
        return 64
