"""The store: the only place pslurm touches SQL."""

from pslurm.controller.store.lease import Lease, LeaseLost, LeaseState
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
from pslurm.controller.store.writer import Fenced, StoreError

__all__ = ["ActiveRun", "Allocation", "Fenced", "JobEvent", "JobPage", "Lease", "LeaseLost", "LeaseState",
           "LiveJobs", "NewStep", "NodeShare", "QueuedJob", "RefRow", "RunEnd", "StepEnd", "StepRecord", "Store",
           "StoreError", "UsageRecord"]
