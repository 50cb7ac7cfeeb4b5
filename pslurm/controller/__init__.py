"""The controller, psctld: the job queue, the scheduler, and the RPC service."""
