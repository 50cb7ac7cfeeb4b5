"""pscontrol ping and pscontrol takeover (scontrol's): the controllers of SlurmctldHost= lines.

``ping`` asks each controller about itself, in SlurmctldHost= order, and prints scontrol's lines
(``Slurmctld(primary) at ctl0 is UP``, ``Slurmctld(backup) at ctl1 is UP``, ``backupN`` with more
than one backup); it exits 0 when any answered. ``takeover [INDEX]`` asks backup INDEX (default 1)
to take control: it asks the active controller to hand over, or takes over at once when none holds
control; pscontrol returns, printing nothing, once that backup serves.
"""

from __future__ import annotations

import os
import time

from pslurm.cli.common import connect_api, fail

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from pslurm.client.api import Api

WAIT_POLL = 0.2  # seconds between pings while a takeover is under way


def run(prog: str, verb: str, words: Sequence[str]) -> None:
    """``pscontrol ping`` or ``pscontrol takeover [INDEX]``; exits non-zero on failure."""
    api = connect_api(prog)
    if verb == "ping":
        if words:
            fail(prog, "ping: too many arguments")
        raise SystemExit(ping(api))
    takeover(prog, api, words)


def role_word(index: int, count: int) -> str:
    """scontrol's name of controller ``index`` of ``count``: primary, backup, or backupN."""
    return "primary" if index == 0 else "backup" if count == 2 else f"backup{index}"


def ping(api: Api) -> int:
    """Print each controller's state; 0 when any is up, else 1 (scontrol's exit status)."""
    from pslurm.client.errors import ClientError

    hosts = api.config.controller_hosts
    up = []
    for index, (name, addr) in enumerate(hosts):
        try:
            api.ping(addr)
            up.append(True)
        except ClientError:
            up.append(False)
        print(f"Slurmctld({role_word(index, len(hosts))}) at {name} is {'UP' if up[-1] else 'DOWN'}")
    if not all(up) and os.getuid() == 0:
        print("*****************************************\n** RESTORE SLURMCTLD DAEMON TO SERVICE **\n"
              "*****************************************")
    return 0 if any(up) else 1


def takeover(prog: str, api: Api, words: Sequence[str]) -> None:
    """Ask backup INDEX to take control and wait until it serves (1.5 x SlurmctldTimeout at most)."""
    from pslurm.client.errors import ClientError

    hosts = api.config.controller_hosts
    if len(words) > 1:
        fail(prog, "takeover: too many arguments")
    if len(hosts) < 2:
        fail(prog, "takeover: no backup controller defined")
    text = words[0] if words else "1"
    index = int(text) if text.isdigit() else -1
    if not 1 <= index < len(hosts):
        fail(prog, f"takeover: invalid backup controller index ({text})")
    name, addr = hosts[index]
    deadline = time.monotonic() + 1.5 * api.config.slurmctld_timeout + 5
    try:
        mode = api.takeover(addr).get("mode")
    except ClientError as exc:
        fail(prog, f"slurm_takeover error: {exc}")
    while mode != "active":
        if time.monotonic() > deadline:
            fail(prog, f"slurm_takeover error: {name} has not taken control yet (the active controller did "
                       "not hand over in time): see its log")
        time.sleep(WAIT_POLL)
        try:
            mode = api.ping(addr).get("mode")
        except ClientError:  # between its standby server and its active one: ask again
            mode = None
