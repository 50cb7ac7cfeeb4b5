"""The cluster configuration's records: what pslurm.conf, gres.conf and cgroup.conf say, parsed.

Plain frozen records. The parsers (:mod:`pslurm.core.confparse`, :mod:`pslurm.core.accounts` for the
account lines) build them, and :mod:`pslurm.core.config` is where the rest of pslurm imports them
from, with the parsers and the loaders: this module imports neither, so that both can import it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pslurm.core.clientconf import ClientAddresses
from pslurm.core.gres import GresRequest


@dataclass(frozen=True)
class NodeConfig:
    """One ``NodeName=`` entry, expanded to a single node."""

    name: str
    addr: str = "127.0.0.1"  # NodeAddr=
    port: int = 6818  # Port= (the agent's gRPC port)
    cpus: int = 1  # CPUs=
    real_memory: int = 1  # RealMemory=, MB
    gres: tuple[GresRequest, ...] = ()  # Gres=gpu:2 or gpu:a100:2,gpu:v100:1
    features: tuple[str, ...] = ()  # Features=a100,ib (what --constraint asks for)

    def gpus(self, type_: str | None = None) -> int:
        return sum(g.count for g in self.gres if g.name == "gpu" and (type_ is None or g.type == type_))


@dataclass(frozen=True)
class PartitionConfig:
    """One ``PartitionName=`` entry."""

    name: str
    nodes: tuple[str, ...]  # expanded node names
    default: bool = False  # Default=YES
    max_time: int | None = None  # MaxTime=, seconds; None is INFINITE
    default_time: int | None = None  # DefaultTime=, seconds; None: max_time
    state: str = "UP"  # State=UP|DOWN|DRAIN|INACTIVE
    max_nodes: int | None = None  # MaxNodes=; None is UNLIMITED
    priority_job_factor: int = 1  # PriorityJobFactor= (the partition factor of multifactor priority)
    allow_groups: tuple[str, ...] = ()  # AllowGroups=; empty is ALL


@dataclass(frozen=True)
class AccountConfig:
    """One ``AccountName=`` line (pslurm's own: Slurm keeps accounts in slurmdbd, set with sacctmgr).
    Names are lower case, as sacctmgr stores them."""

    name: str
    users: tuple[str, ...] = ()  # Users=ana,bo: who may charge it
    all_users: bool = False  # Users=ALL: every user may
    fairshare: int = 1  # Fairshare=N: the account's raw shares of the cluster (sacctmgr's Fairshare)
    description: str = ""  # Description=

    def admits(self, user: str) -> bool:
        """Whether ``user`` may charge this account."""
        return self.all_users or user in self.users


@dataclass(frozen=True)
class GresConfLine:
    """One gres.conf line: ``[NodeName=c[000-001]] Name=gpu [Type=a100] File=/dev/nvidia[0-1] [Cores=0-7]``
    or ``Count=N`` instead of ``File=``, or ``AutoDetect=nvml``; ``Name=shard|mps Count=N [File=...]``
    shares the GPUs (of its File=, else all of the node's); ``Memory=SIZE`` on a ``Name=gpu`` line
    (pslurm's own) is the memory of each of its GPUs, for GPUs NVML does not measure."""

    name: str | None  # None on a bare AutoDetect= line
    node_names: tuple[str, ...] | None = None  # None: applies to every node
    type: str | None = None
    files: tuple[str, ...] = ()  # expanded, one per device
    count: int = 0  # len(files) when File= is given on a gpu line; shard/mps: the line's shards or MPS units
    cores: tuple[int, ...] | None = None
    autodetect: str | None = None  # "nvml" or "off"
    memory_mb: int | None = None  # Memory= (gpu lines): each GPU's memory, MB


@dataclass(frozen=True)
class CgroupConfig:
    """cgroup.conf beside pslurm.conf."""

    constrain_devices: bool = False  # ConstrainDevices=yes: a job opens only its own GPUs
    constrain_cores: bool = False  # ConstrainCores=yes: a job's cpuset is its allocated CPUs
    constrain_ram_space: bool = False  # ConstrainRAMSpace=yes: --mem becomes the job's memory limit
    plugin: str = "autodetect"  # CgroupPlugin=autodetect|cgroup/v1|cgroup/v2|disabled
    mountpoint: str = "/sys/fs/cgroup"  # CgroupMountpoint=: where the cgroup hierarchies are mounted


@dataclass(frozen=True)
class ClusterConfig(ClientAddresses):
    """Everything the controller, the agents and the CLIs read from pslurm.conf."""

    path: str  # the file this came from
    cluster_name: str = "pslurm"  # ClusterName=
    controller_host: str = "localhost"  # SlurmctldHost=name(addr): the name
    controller_addr: str = "127.0.0.1"  # ... and the address to reach it on
    controller_port: int = 6817  # SlurmctldPort=
    # SlurmctldHost= lines after the first: the backup controllers, in order, (name, address) each
    backup_controllers: tuple[tuple[str, str], ...] = ()
    slurmctld_timeout: int = 10  # SlurmctldTimeout=: seconds before a backup takes over from a silent primary
    rest_port: int = 6820  # RestPort= (pslurm's own): the user API (HTTP/JSON) on the controller's address
    database_url: str = ""  # DatabaseURL= (pslurm's own key); "" -> sqlite in state_dir
    # DatabaseURLFile= (pslurm's own): a file only the controller's user reads, holding the URL (and
    # its password), as Slurm keeps StoragePass in a 0600 slurmdbd.conf; read by psctld alone
    database_url_file: str = ""
    state_dir: str = "/var/spool/pslurm"  # StateSaveLocation=
    spool_dir: str = "/var/spool/pslurm/d"  # SlurmdSpoolDir=
    slurmd_timeout: int = 300  # SlurmdTimeout=, seconds without heartbeat before DOWN
    kill_wait: int = 30  # KillWait=, seconds between SIGTERM and SIGKILL
    # BatchStartTimeout=: seconds a started job may go unseen in its agent's heartbeats (its launch on
    # the way) before the controller takes it as lost
    batch_start_timeout: int = 10
    auth_key: str = ""  # AuthKey= (pslurm's own): the cluster key; "" -> pslurm.key beside this file
    auth_socket: str = ""  # AuthSocket= (pslurm's own): the credential socket; "" -> pslurm.sock beside it
    nodes: dict[str, NodeConfig] = field(default_factory=dict)
    partitions: dict[str, PartitionConfig] = field(default_factory=dict)
    # AccountName= lines by name, in file order; none: accounts are not checked (any -A is taken)
    accounts: dict[str, AccountConfig] = field(default_factory=dict)
    default_accounts: dict[str, str] = field(default_factory=dict)  # UserName=bo DefaultAccount=lab2
    extra: dict[str, str] = field(default_factory=dict)  # keys pslurm does not use, kept as read

    @property
    def default_partition(self) -> PartitionConfig | None:
        for part in self.partitions.values():
            if part.default:
                return part
        return next(iter(self.partitions.values()), None)


@dataclass(frozen=True)
class SchedulerConfig:
    """The scheduling keys of pslurm.conf (slurm.conf's names; the per-user limits, which Slurm keeps in
    QOS and associations, are pslurm.conf keys here)."""

    weight_age: int = 0  # PriorityWeightAge=
    weight_fairshare: int = 0  # PriorityWeightFairshare=
    weight_jobsize: int = 0  # PriorityWeightJobSize=
    weight_partition: int = 0  # PriorityWeightPartition=
    weight_qos: int = 0  # PriorityWeightQOS= (pslurm has no QOS: the factor is 0)
    max_age: int = 7 * 86400  # PriorityMaxAge=
    decay_half_life: int = 7 * 86400  # PriorityDecayHalfLife= (0: no decay)
    favor_small: bool = False  # PriorityFavorSmall=
    billing_weights: tuple[tuple[str, float], ...] = (("cpu", 1.0), ("gres/gpu", 1.0))  # TRESBillingWeights=
    max_job_count: int = 0  # MaxJobCount= (0: no limit)
    max_array_size: int = 1001  # MaxArraySize=
    max_submit_jobs_per_user: int = 0  # MaxSubmitJobsPerUser= (pslurm's; Slurm's QOS MaxSubmitJobsPerUser)
    max_jobs_per_user: int = 0  # MaxJobsPerUser= (pslurm's; Slurm's QOS MaxJobsPerUser)
    max_gpus_per_user: int = 0  # MaxTRESPerUser=gres/gpu=N (pslurm's; Slurm's QOS MaxTRESPerUser)
    max_cpus_per_user: int = 0  # MaxTRESPerUser=cpu=N
    job_requeue: bool = True  # JobRequeue= (1: batch jobs may be requeued unless --no-requeue)
    enforce_part_limits: bool = True  # EnforcePartLimits= (NO: a job over MaxTime pends PartitionTimeLimit)
    bf_max_job_test: int = 500  # SchedulerParameters=bf_max_job_test=N: reservations per pass
    bf_interval: int = 1  # SchedulerParameters=bf_interval=N: seconds between backfill passes (-1: none)
    gpu_mem_auto_default: int = 0  # GpuMemAutoDefault= (MB): --gpu-mem=auto without history; 0: a whole GPU's memory
    gpu_mem_auto_margin: int = 20  # GpuMemAutoMargin= (percent): added to the measured peak for --gpu-mem=auto
