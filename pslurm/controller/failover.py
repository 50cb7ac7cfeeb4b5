"""Several controllers, one active: Slurm's backup controllers on a lease in the shared database.

pslurm.conf names the controllers with several ``SlurmctldHost=`` lines, the primary first. Every
psctld runs against the same PostgreSQL; the one holding the controller lease
(:mod:`pslurm.controller.store.lease`) is active: it serves agents (gRPC) and users (HTTP), and
every write it makes carries the lease's token. The others stand by: they answer ``ping`` and
``takeover`` on the HTTP port, refuse everything else with 503 (so clients try the next host), and
try for the lease every ``SlurmctldTimeout/10`` seconds.

Timing, with T = SlurmctldTimeout: the active controller renews its lease for T/2 every T/10. A
backup takes the lease once it has run out (a later backup waits T/10 more per place, so they take
over in order), loads the queue and serves, all well within T of the active one's death or of its
losing the database. The active controller stops serving once it could not renew for T/2 - T/10
(its own clock), before any backup may take over, and it learns of a lost lease at its next
renewal; its writes meanwhile fail on the fence, so nothing it does after losing the lease is
ever committed. A controller that stops (SIGTERM) releases the lease: a backup takes over at once.
``pscontrol takeover`` asks the active controller to hand over: it stops serving, releases the
lease to the backup that asked, and stands by itself (as Slurm's primary does on REQUEST_CONTROL).
A primary that starts while a backup is in control asks for control back the same way, as Slurm's
primary slurmctld does.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from pslurm.controller.store import Lease, LeaseLost
from pslurm.core.config import ClusterConfig, ConfigError

T = TypeVar("T")
log = logging.getLogger("psctld")
LEASE_SHARE = 0.5  # the lease lasts SlurmctldTimeout/2 ...
RENEW_SHARE = 0.1  # ... renewed (and tried for, by a backup) every SlurmctldTimeout/10


@dataclass(frozen=True)
class Me:
    """Which of the SlurmctldHost= lines this psctld is."""

    index: int  # 0: the primary
    name: str
    addr: str

    def role(self, count: int) -> str:
        """scontrol ping's word: primary, backup, or backupN with more than one backup."""
        return "primary" if self.index == 0 else "backup" if count == 2 else f"backup{self.index}"


def this_controller(config: ClusterConfig, name: str | None = None) -> Me:
    """The SlurmctldHost= line named ``name`` (psctld --host), else the one naming this host (its
    short or full name), else the only one. ConfigError when none fits."""
    hosts = config.controller_hosts
    names = ", ".join(n for n, _ in hosts)
    if name is not None:
        for i, (n, addr) in enumerate(hosts):
            if n == name:
                return Me(i, n, addr)
        raise ConfigError(f"--host {name} is none of the SlurmctldHost= lines ({names})")
    if len(hosts) == 1:
        return Me(0, *hosts[0])
    full = socket.gethostname()
    for i, (n, addr) in enumerate(hosts):
        if n in (full, full.split(".")[0]):
            return Me(i, n, addr)
    raise ConfigError(f"this host ({full}) is none of the SlurmctldHost= lines ({names}): "
                      "start psctld with --host NAME")


def as_seen_by(config: ClusterConfig, me: Me) -> ClusterConfig:
    """``config`` with this controller's address where the controller binds (its gRPC and HTTP ports)."""
    return replace(config, controller_host=me.name, controller_addr=me.addr)


def require_shared_database(config: ClusterConfig, database_url: str) -> None:
    """ConfigError when several controllers are configured on a database they cannot share."""
    if config.backup_controllers and database_url.startswith("sqlite"):
        raise ConfigError(f"{len(config.controller_hosts)} SlurmctldHost= lines need a database every controller "
                          "reaches (DatabaseURL=postgresql+psycopg://...): SQLite is one controller's file; "
                          "keep one SlurmctldHost= line, or move the store to PostgreSQL")


class Role:
    """What this psctld is now, for ``ping`` and ``takeover`` (the HTTP API of both modes)."""

    def __init__(self, config: ClusterConfig, me: Me, lease: Lease, operators: frozenset[int]) -> None:
        self.me, self.lease, self.operators = me, lease, operators
        self.count = len(config.controller_hosts)
        self.timeout = float(config.slurmctld_timeout)
        self.mode = "standby" if self.count > 1 else "active"
        self.wake = threading.Event()  # try for the lease now (a takeover was asked)

    def ping(self) -> dict[str, Any]:
        """This controller: name, role, mode, the active controller's name as the database has it,
        whether the database answered, and its clock (pslurm doctor measures skew against it)."""
        reply: dict[str, Any] = {"name": self.me.name, "index": self.me.index, "role": self.me.role(self.count),
                                 "mode": self.mode, "active": self.me.name if self.count == 1 else "",
                                 "database": "ok"}
        try:
            state = self.lease.state()
            if self.count > 1 and state.holder and state.remaining > 0:
                reply["active"] = state.holder
        except Exception as exc:  # noqa: BLE001 - any failure of the database is the answer
            log.warning("ping: the database did not answer: %s", exc)
            reply["database"] = f"unreachable: {type(exc).__name__}"
        reply["time"] = time.time()
        return reply

    def takeover(self) -> dict[str, Any]:
        """Ask for control (scontrol takeover): a standby asks the active controller to hand over and
        tries at once; the active controller has it already."""
        if self.mode == "standby":
            self.lease.ask_handover()
            self.wake.set()
            log.info("takeover asked: waiting for the active controller to hand over")
        return {"name": self.me.name, "mode": self.mode}


class LeaseKeeper:
    """The active controller's renewals, in a thread: ``end`` is set (and :attr:`why` says why) when the
    lease is lost, cannot be renewed in time, or is to be handed over.

    Each renewal runs on a worker thread of its own, waited for no longer than the lease may still
    hold: a database that stopped answering (a partition: the call hangs, no error comes) ends this
    controller's service on its own clock all the same, before a backup may take the lease."""

    def __init__(self, lease: Lease, timeout: float, end: threading.Event,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.lease, self.end, self.clock = lease, end, clock
        self.interval = timeout * RENEW_SHARE
        self.why = ""
        self.handover = False
        self._thread = threading.Thread(target=self._run, name="lease", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def join(self) -> None:
        self._thread.join()

    def _run(self) -> None:
        # a lease runs from its renewal's start at the earliest: stop serving an interval before it may end
        limit = self.lease.period - self.interval
        last_ok = self.clock()
        while not self.end.wait(self.interval):
            started = self.clock()
            try:
                asked = _within(self.lease.renew, max(0.0, last_ok + limit - started))
            except LeaseLost as exc:
                self._stop(str(exc))
                return
            except TimeoutError:
                self._stop(f"the database did not answer a renewal of the controller lease for "
                           f"{self.clock() - last_ok:.1f}s")
                return
            except Exception as exc:  # noqa: BLE001 - the database failed: count the time
                if self.clock() - last_ok > limit:
                    self._stop(f"could not renew the controller lease for {self.clock() - last_ok:.1f}s ({exc})")
                    return
                log.warning("could not renew the controller lease: %s", exc)
                continue
            last_ok = started
            if asked and asked != self.lease.name:
                self.handover = True
                self._stop(f"{asked} asked for control (takeover)")
                return

    def _stop(self, why: str) -> None:
        self.why = why
        self.end.set()


def run(role: Role, stop: threading.Event, stand_by: Callable[[], Callable[[], None]],
        serve_active: Callable[[threading.Event], None], fence: Callable[[Lease | None], None]) -> None:
    """Stand by until this controller holds the lease, serve as the active one until it is lost,
    handed over or ``stop`` is set; again, until ``stop``. ``stand_by()`` starts the standby's HTTP
    server and returns its stop; ``serve_active(end)`` serves until ``end`` is set; ``fence(lease)``
    makes every write check the lease (None: none)."""
    lease = role.lease
    poll = role.timeout * RENEW_SHARE
    _forward(stop, role.wake)
    if role.me.index == 0:  # a primary that starts asks a backup in control for it back, as Slurm's does
        _quietly(lambda: _reclaim(role), "ask the backup in control to hand over")
    while not stop.is_set():
        role.mode = "standby"
        stop_standby = stand_by()
        try:
            while not stop.is_set() and not _quietly(lease.try_acquire, "try for the controller lease"):
                role.wake.wait(poll)
                role.wake.clear()
        finally:
            stop_standby()
        if stop.is_set():
            break
        log.info("%s (%s) holds the controller lease (token %d): taking control", role.me.name,
                 role.me.role(role.count), lease.token)
        fence(lease)
        end = threading.Event()
        _forward(stop, end)
        keeper = LeaseKeeper(lease, role.timeout, end)
        keeper.start()
        role.mode = "active"
        serve_active(end)
        end.set()
        keeper.join()
        if stop.is_set() or keeper.handover:
            _quietly(lease.release, "release the controller lease")
        if not stop.is_set():
            log.warning("%s stands by again: %s", role.me.name, keeper.why)


def _within(fn: Callable[[], T], timeout: float) -> T:
    """``fn()`` on a daemon thread of its own, waited for ``timeout`` seconds at most (TimeoutError:
    it is left to end on its own, and never keeps the process from exiting)."""
    outcome: list[Any] = []
    done = threading.Event()

    def work() -> None:
        try:
            outcome.append((True, fn()))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            outcome.append((False, exc))
        finally:
            done.set()

    threading.Thread(target=work, name="lease-renew", daemon=True).start()
    if not done.wait(timeout):
        raise TimeoutError(f"no answer in {timeout:.1f}s")
    ok, value = outcome[0]
    if not ok:
        raise value
    return value  # type: ignore[no-any-return]


def _reclaim(role: Role) -> None:
    state = role.lease.state()
    if state.holder and state.holder != role.me.name and state.remaining > 0:
        log.info("the primary asks %s, in control, to hand over", state.holder)
        role.lease.ask_handover()


def _quietly(fn: Callable[[], object], what: str) -> bool:
    """``fn()`` as a truth value; False, logged, when the database fails (tried again later)."""
    try:
        return bool(fn())
    except Exception as exc:  # noqa: BLE001 - an unreachable database: the loop tries again
        log.warning("could not %s: %s", what, exc)
        return False


def _forward(stop: threading.Event, to: threading.Event) -> None:
    """Set ``to`` once ``stop`` is set (a daemon thread waits for it)."""
    def forward() -> None:
        stop.wait()
        to.set()

    threading.Thread(target=forward, name="stop-forward", daemon=True).start()
