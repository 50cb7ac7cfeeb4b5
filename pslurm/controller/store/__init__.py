"""The store: the only place pslurm touches SQL."""

from pslurm.controller.store.queries import Allocation, JobEvent, Store

__all__ = ["Allocation", "JobEvent", "Store"]
