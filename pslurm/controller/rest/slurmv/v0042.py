"""REST v0.0.42 (Slurm 24.11): a ping says ``responding`` and ``primary``, a cancel each job's status;
a job has no expanded paths nor submit line yet."""

from pslurm.controller.rest.slurmv import Version

VERSION = Version("v0.0.42", absent={"job_info": frozenset({"stdout_expanded", "stderr_expanded", "submit_line"})})
