"""The cluster's checks from this host: each controller answers (and which one is active), the active
controller's database answers, and this host's clock agrees with the controller's.

Clock skew matters: credentials carry an expiry (5 minutes) checked on the receiver's clock, and job
times come from the controller's clock and the agents'. It is measured as the controller's time in
its ping reply less the middle of the request, as NTP does for one exchange."""

from __future__ import annotations

import time
from typing import Any

from pslurm.client import ClientError
from pslurm.client.api import Api
from pslurm.core.config import ClusterConfig
from pslurm.doctor.report import Check, fail, ok, warn

SKEW_WARN = 1.0  # seconds: worth fixing (chrony, systemd-timesyncd)
SKEW_FAIL = 10.0  # seconds: credentials and job times go wrong


def check_cluster(config: ClusterConfig) -> list[Check]:
    """The controllers, the database (as the active controller sees it), the clock."""
    hosts = config.controller_hosts
    answers: dict[str, dict[str, Any]] = {}
    skews: dict[str, float] = {}
    with Api(config, timeout=5) as api:
        for name, addr in hosts:
            try:
                sent = time.time()
                reply = api.ping(addr)
                got = time.time()
            except ClientError:
                continue
            answers[name] = reply
            skews[name] = float(reply.get("time") or 0.0) - (sent + got) / 2
    down = [name for name, _ in hosts if name not in answers]
    active = [name for name, reply in answers.items() if reply.get("mode") == "active"]
    where = ", ".join(f"{name} {answers[name]['mode']}" for name, _ in hosts if name in answers)
    checks = []
    if not answers:
        checks.append(fail("controller", f"no controller answers ({', '.join(f'{n} at {a}' for n, a in hosts)}, "
                                         f"RestPort={config.rest_port}): is psctld running? (systemctl status psctld)"))
        return checks
    if not active:
        checks.append(fail("controller", f"no controller is active ({where}): see psctld's log"))
    elif down:
        checks.append(warn("controller", f"{where}; {', '.join(down)} does not answer: the cluster has no backup"))
    else:
        checks.append(ok("controller", where))
    reporter = active[0] if active else next(iter(answers))
    database = str(answers[reporter].get("database"))
    if database == "ok":
        checks.append(ok("database", f"{reporter} reaches its database"))
    else:
        checks.append(fail("database", f"{reporter}'s database is {database}: see psctld's log and the "
                                       "database server"))
    skew = skews[reporter]
    text = f"this host's clock is {abs(skew):.3f} s {'behind' if skew > 0 else 'ahead of'} {reporter}'s"
    if abs(skew) >= SKEW_FAIL:
        checks.append(fail("clock", f"{text}: synchronise the clocks (chrony or systemd-timesyncd)"))
    elif abs(skew) >= SKEW_WARN:
        checks.append(warn("clock", f"{text}: synchronise the clocks (chrony or systemd-timesyncd)"))
    else:
        checks.append(ok("clock", text))
    return checks
