"""REST v0.0.41 (Slurm 24.05): no expanded paths nor submit line in a job, no restart count in
slurmdbd's, a ping without ``responding``/``primary``, a submit reply with ``result``, an update
reply with the job's id as text, a cancel answered with nothing but meta."""

from pslurm.controller.rest.slurmv import Version

VERSION = Version(
    "v0.0.41",
    absent={"job_info": frozenset({"stdout_expanded", "stderr_expanded", "submit_line"}),
            "db_job": frozenset({"restart_cnt"}),
            "ping": frozenset({"responding", "primary"})},
    submit_result=True, post_flat=True, kill_status=False)
