"""The controllers through the commands: `pslurm up --controllers 2 --db URL` on PostgreSQL, pscontrol
ping and takeover as scontrol's, psrun's wait and `psbatch -W` carried over a failover (psrun's output
stream ends with one line), and the refusals
(SQLite with two controllers, a bad takeover index) in one line each."""

from __future__ import annotations

import http.client
import os
import signal
import threading
import time
from pathlib import Path

from tests.conftest import Cluster, cli, fresh_pg_database, wait_for


def readyz(host: str, cluster: Cluster) -> int:
    """slurmrestd's readiness probe of the controller at ``host``: 204 ready, 500 not."""
    from pslurm.core.config import load_cluster_config

    conn = http.client.HTTPConnection(host, load_cluster_config(str(cluster.conf)).rest_port, timeout=30)
    try:
        conn.request("GET", "/readyz")
        return conn.getresponse().status
    finally:
        conn.close()


def test_ping_and_takeover_with_one_controller(cluster: Cluster) -> None:
    ping = cluster.run("pscontrol", "ping")
    assert (ping.returncode, ping.stdout, ping.stderr) == (0, "Slurmctld(primary) at localhost is UP\n", "")
    takeover = cluster.run("pscontrol", "takeover")
    assert takeover.returncode == 1 and takeover.stderr == "pscontrol: error: takeover: no backup controller defined\n"
    extra = cluster.run("pscontrol", "ping", "x")
    assert extra.returncode == 1 and extra.stderr == "pscontrol: error: ping: too many arguments\n"


def test_two_controllers_on_sqlite_are_refused_with_the_reason(tmp_path: Path) -> None:
    up = cli("pslurm", "up", "--controllers", "2", "--nodes", "1", "--state-dir", str(tmp_path / "s"))
    assert up.returncode == 1 and up.stderr.count("\n") == 1, up.stderr
    assert "2 controllers share one PostgreSQL database: give --db postgresql+psycopg://" in up.stderr
    conf = tmp_path / "pslurm.conf"
    conf.write_text(f"SlurmctldHost=ctl0(127.0.0.1)\nSlurmctldHost=ctl1(127.0.0.2)\nStateSaveLocation={tmp_path}/ctld\n")
    psctld = cli("psctld", "-f", str(conf), "--host", "ctl0")
    assert psctld.returncode == 1 and psctld.stderr.startswith("psctld: error: 2 SlurmctldHost= lines need a "
                                                               "database every controller reaches"), psctld.stderr


def test_a_local_cluster_with_a_backup_fails_over_under_the_commands(tmp_path: Path) -> None:
    state = tmp_path / "state"
    with fresh_pg_database(f"pslurm_up2_{os.getpid()}") as url:
        up = cli("pslurm", "up", "--controllers", "2", "--db", url, "--nodes", "2", "--gpus-per-node", "1",
                 "--state-dir", str(state), timeout=120)
        try:
            assert up.returncode == 0, up.stderr
            assert "backup on 127.0.0.2:" in up.stdout
            cluster = Cluster(state)
            ping = cluster.run("pscontrol", "ping")
            assert ping.stdout == "Slurmctld(primary) at ctl0 is UP\nSlurmctld(backup) at ctl1 is UP\n"
            assert (readyz("127.0.0.1", cluster), readyz("127.0.0.2", cluster)) == (204, 500)  # the backup stands by
            bad = cluster.run("pscontrol", "takeover", "2")
            assert bad.returncode == 1 and bad.stderr == "pscontrol: error: takeover: invalid backup controller " \
                                                         "index (2)\n"
            # a psrun and a psbatch -W waiting across the primary's death
            marker = tmp_path / "go"
            results: dict[str, object] = {}

            def run(name: str, *args: str) -> None:
                results[name] = cluster.run(*args, cwd=tmp_path, timeout=120)

            waiting = [threading.Thread(target=run, args=("psrun", "psrun", "sh", "-c", "echo before; "
                                                           f"while [ ! -e {marker} ]; do sleep 0.1; done; echo after")),
                       threading.Thread(target=run, args=("psbatch", "psbatch", "-W", "--wrap",
                                                           f"while [ ! -e {marker} ]; do sleep 0.1; done; exit 3"))]
            for thread in waiting:
                thread.start()
            wait_for(lambda: len(cluster.run("psqueue", "-h", "-t", "R", "-o", "%i").stdout.split()) == 2)
            time.sleep(0.5)  # psrun has its output stream, psbatch its wait
            os.kill(int((state / "run" / "psctld-ctl0.pid").read_text()), signal.SIGKILL)
            time.sleep(1)
            marker.touch()  # the jobs end while no controller serves, or just after the backup took over
            for thread in waiting:
                thread.join(120)
            psrun, psbatch = results["psrun"], results["psbatch"]
            # its wait went on through the backup; its output stream broke with the controller: one line says so
            assert psrun.stdout.startswith("before\n"), psrun  # type: ignore[union-attr]
            assert psrun.returncode == 1 and psrun.stderr.count("\n") == 1, psrun  # type: ignore[union-attr]
            assert "its output stream broke, output may be missing" in psrun.stderr  # type: ignore[union-attr]
            assert psbatch.returncode == 3, psbatch  # type: ignore[union-attr]
            ping = cluster.run("pscontrol", "ping")
            assert ping.returncode == 0 and ping.stdout.startswith(
                "Slurmctld(primary) at ctl0 is DOWN\nSlurmctld(backup) at ctl1 is UP\n"), ping.stdout
            assert readyz("127.0.0.2", cluster) == 204  # the backup took over: ready
        finally:
            cli("pslurm", "down", "--state-dir", str(state), timeout=60)
