"""The store: the only place pslurm touches SQL."""

from pslurm.controller.store.queries import Store
from pslurm.controller.store.records import Allocation, JobEvent, QueuedJob, RefRow, UsageRecord

__all__ = ["Allocation", "JobEvent", "QueuedJob", "RefRow", "Store", "UsageRecord"]
