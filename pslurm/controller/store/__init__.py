"""The store: the only place pslurm touches SQL."""

from pslurm.controller.store.queries import Allocation, JobEvent, QueuedJob, RefRow, Store, UsageRecord

__all__ = ["Allocation", "JobEvent", "QueuedJob", "RefRow", "Store", "UsageRecord"]
