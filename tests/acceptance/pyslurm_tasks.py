"""Functions pyslurmutils runs as jobs (tests/acceptance/test_jwt_rest.py). pyslurmutils sends this
module's source to the job and runs it there: no ``from __future__`` line (it prepends its own code),
no imports."""


def add(a: int, b: int) -> int:
    return a + b


def where(tag: str) -> str:
    import os

    return f"{tag} in job {os.environ.get('SLURM_JOB_ID', '?')}"
