"""REST v0.0.44 (Slurm 25.11): the shapes as ``rest/slurmshapes.py`` builds them."""

from pslurm.controller.rest.slurmv import Version

VERSION = Version("v0.0.44")
