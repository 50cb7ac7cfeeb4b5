"""Failover figures (issue 22): the drill of tests/integration/test_failover.py, repeated, with its
numbers printed rather than asserted.

    python bench/failover_bench.py --db postgresql+psycopg://USER:PASSWORD@HOST:PORT/BASE [--rounds 3]
                                   [--only kill,cut,takeover] [--timeout 10]

Each round of each kind makes a fresh database beside BASE's (its role needs CREATEDB), brings up two
controllers (ctl0 reaching PostgreSQL through a TCP relay the drill can cut) and two agents of 4 CPUs,
submits 2-second jobs from 4 threads (one every 0.2 s each) through pslurm.client, and once six jobs
run disrupts the active
controller: ``kill`` (SIGKILL), ``cut`` (its database connection stops passing bytes, its process
lives), ``takeover`` (pscontrol takeover). It prints one line per round: seconds from the disruption
to the first submit acknowledged after it, the longest time without any acknowledgement around it,
submits acknowledged, jobs lost, stored twice, run twice, the jobs running on their nodes that did not
run on to COMPLETED, the jobs started whose launch went down with the killed controller (requeued after
BatchStartTimeout and run once), node failures, and the submits that got an error (not acknowledged:
their clients were told), with how many of those were stored all the same (sent, and the answer lost
with the controller).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.integration.failover_drill import HaCluster, Outcome, drill  # noqa: E402


def fresh_database(base: str, name: str) -> str:
    from sqlalchemy import create_engine, text

    admin = create_engine(base, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return base.rsplit("/", 1)[0] + "/" + name


def one_round(kind: str, base: str, timeout: int, index: int) -> Outcome:
    url = fresh_database(base, f"pslurm_failover_bench_{kind}_{index}")
    with tempfile.TemporaryDirectory(prefix=f"failover-{kind}-") as tmp:
        cluster = HaCluster(Path(tmp), url, timeout)
        try:
            cluster.up()
            disrupt = {"kill": lambda: cluster.kill("ctl0"), "cut": cluster.proxy.cut,
                       "takeover": lambda: subprocess.run([str(Path(sys.executable).parent / "pscontrol"),
                                                           "takeover"], env=cluster.env, check=True)}[kind]
            return drill(cluster, disrupt)
        finally:
            cluster.down()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--db", required=True, help="PostgreSQL URL; fresh databases are made beside it")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default="kill,cut,takeover")
    parser.add_argument("--timeout", type=int, default=10, help="SlurmctldTimeout")
    args = parser.parse_args()
    print(f"SlurmctldTimeout={args.timeout}; per round: serve (s), acknowledged, lost, duplicated, ran twice, "
          "running jobs not COMPLETED, node failures, submits refused")
    for kind in args.only.split(","):
        serves = []
        for i in range(args.rounds):
            out = one_round(kind, args.db, args.timeout, i)
            serves.append(out.time_to_serve)
            broken = sum(1 for state in out.running_before.values() if state != "COMPLETED")
            print(f"{kind:9} round {i + 1}: serve {out.time_to_serve:5.2f} s, no acknowledgement for "
                  f"{out.longest_gap:5.2f} s, acknowledged {out.acknowledged}, "
                  f"lost {len(out.lost)}, duplicated {len(out.duplicated)}, ran twice {len(out.ran_twice)}, "
                  f"running jobs broken {broken} of {len(out.running_before)}, launches lost with the "
                  f"controller (run later) {len(out.requeued_unlaunched)}, node failures {len(out.node_failures)}, "
                  f"submits refused {len(out.failed_submits)} (of them stored all the same "
                  f"{len(out.stored_unacknowledged)})", flush=True)
        print(f"{kind:9} serve: median {statistics.median(serves):.2f} s, range {min(serves):.2f}-{max(serves):.2f} s")


if __name__ == "__main__":
    main()
