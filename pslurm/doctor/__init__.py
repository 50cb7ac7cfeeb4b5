"""pslurm doctor: whether a host is set up as pslurm needs, one line per check, and what to fix.

``pslurm doctor`` runs ``python -m pslurm.doctor`` (this package is a program of its own: it uses
the agent's own cgroup and GPU code, which the commands may not import). The checks: the files
(:mod:`.files`: the cluster key's mode, pslurm.conf's, DatabaseURLFile's), the node (:mod:`.node`:
cgroup mode and controllers, a probe job's device filter, NVML and each GPU's health, MPS, and with
``--gpu`` a CUDA program in a probe job), the cluster (:mod:`.cluster`: each controller, its
database, the clock's skew against it). Each check returns :class:`~.report.Check` lines.
"""
