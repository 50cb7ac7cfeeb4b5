"""The store: the only place pslurm touches SQL."""

from pslurm.controller.store.queries import Allocation, JobEvent, QueuedJob, Store

__all__ = ["Allocation", "JobEvent", "QueuedJob", "Store"]
