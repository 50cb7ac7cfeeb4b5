"""REST v0.0.43 (Slurm 25.05): a job's expanded output paths; no submit line in a job yet."""

from pslurm.controller.rest.slurmv import Version

VERSION = Version("v0.0.43", absent={"job_info": frozenset({"submit_line"})})
