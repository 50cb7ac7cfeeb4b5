"""The standby controller under load, on a real PostgreSQL (issue 22): while a loop submits and jobs
run, the active controller is killed (kill -9), cut off from its database, or asked to hand over
(pscontrol takeover). Each time the other serves within SlurmctldTimeout (10 s), every acknowledged
job is stored exactly once and runs exactly once, the jobs running at the moment run on to their
end, and the nodes stay up. (bench/failover_bench.py prints the same drill's figures.)"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import cli, fresh_pg_database
from tests.integration.failover_drill import HaCluster, Outcome, drill

TIMEOUT = 10  # SlurmctldTimeout


@pytest.fixture
def ha(tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[HaCluster]:
    with fresh_pg_database(f"pslurm_ha{os.getpid()}_{request.node.name[-24:].lower()}") as url:
        cluster = HaCluster(tmp_path, url, TIMEOUT)
        try:
            cluster.up()
            yield cluster
        finally:
            cluster.down()


def held(outcome: Outcome) -> None:
    """What every drill must show."""
    assert outcome.time_to_serve < TIMEOUT, outcome
    assert outcome.acknowledged > 10, outcome
    assert not outcome.lost and not outcome.duplicated, outcome
    assert not outcome.ran_twice and not outcome.never_ran, outcome
    assert outcome.running_before and set(outcome.running_before.values()) == {"COMPLETED"}, outcome
    assert not outcome.node_failures, outcome
    assert set(outcome.nodes.values()) == {"UP"}, outcome


def test_the_backup_serves_when_the_active_controller_is_killed(ha: HaCluster) -> None:
    outcome = drill(ha, lambda: ha.kill("ctl0"))
    held(outcome)
    assert outcome.active_after == "ctl1"


def test_the_backup_serves_when_the_active_controller_loses_its_database(ha: HaCluster) -> None:
    outcome = drill(ha, ha.proxy.cut)
    held(outcome)
    assert outcome.active_after == "ctl1"
    assert "stands by again: the database did not answer" in (ha.tmp / "ctl0.log").read_text()
    assert ha.procs["ctl0"].poll() is None  # its process lives on, standing by


def test_a_graceful_takeover_hands_control_to_the_backup(ha: HaCluster) -> None:
    def takeover() -> None:
        done = cli("pscontrol", "takeover", env=ha.env)
        assert done.returncode == 0 and done.stdout == done.stderr == "", done

    outcome = drill(ha, takeover)
    held(outcome)
    assert outcome.active_after == "ctl1"
    ping = cli("pscontrol", "ping", env=ha.env)
    assert ping.stdout.splitlines() == ["Slurmctld(primary) at ctl0 is UP", "Slurmctld(backup) at ctl1 is UP"]
