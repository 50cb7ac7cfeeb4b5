"""The store: the only place pslurm touches SQL."""

from pslurm.controller.store.live import LiveJobs
from pslurm.controller.store.queries import Store
from pslurm.controller.store.records import (
    ActiveRun,
    Allocation,
    JobEvent,
    JobPage,
    NewStep,
    NodeShare,
    QueuedJob,
    RefRow,
    RunEnd,
    StepEnd,
    StepRecord,
    UsageRecord,
)
from pslurm.controller.store.writer import StoreError

__all__ = ["ActiveRun", "Allocation", "JobEvent", "JobPage", "LiveJobs", "NewStep", "NodeShare", "QueuedJob", "RefRow",
           "RunEnd", "StepEnd", "StepRecord", "Store", "StoreError", "UsageRecord"]
