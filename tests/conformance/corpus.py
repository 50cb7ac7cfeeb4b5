"""The corpus: command lines people and tools type, each run on both clusters after the scenario.

A case is an id, the command it is about (for the figures), a command line (``{name}``: the id of the
scenario's job of that name; ``{dir}``: the side's working directory) and what it is fed on stdin.
Cases run in the order listed: those that only read first, then those that submit, then those that
change or end jobs (each on jobs of its own or on the scenario's, after every reader ran).

Every option of squeue, sinfo, scancel, sacct, scontrol and sprio (Slurm 22.05's option tables,
../shared/notes/slurm-surface-22.05.md), every -o letter and -O field of squeue and sinfo, every
field of sacct; the everyday lines of handbooks; and the exact lines of the tools people drive Slurm
with, read from their sources: submitit 1.5 (slurm/slurm.py), snakemake-executor-plugin-slurm 2.8
(job_status_query.py, __init__.py, submit_string.py), dask-jobqueue 0.9 (slurm.py), Nextflow
(SlurmExecutor.groovy), parsl (providers/slurm/slurm.py), Open OnDemand (ood_core's
job/adapters/slurm.rb: every command with ``-M CLUSTER``), Lightning (plugins/environments/slurm.py,
its requeue on SIGUSR1) and prometheus-slurm-exporter (accounts.go, cpus.go, gpus.go, node.go,
nodes.go, partitions.go, queue.go, users.go).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Case:
    id: str
    command: str  # squeue, sinfo, scancel, sacct, scontrol, sprio, sbatch, srun, salloc
    line: str
    stdin: str = ""
    phase: int = 0  # 0 reads, 1 submits, 2 changes


CASES: list[Case] = []
_IDS: set[str] = set()


def case(line: str, id: str = "", stdin: str = "", phase: int = 0, command: str = "") -> None:
    """Add a case; its id defaults to its command line."""
    cid = id or line
    if cid in _IDS:
        raise ValueError(f"two cases named {cid!r}")
    _IDS.add(cid)
    CASES.append(Case(cid, command or line.split()[0], line, stdin, phase))


# -- squeue ---------------------------------------------------------------------------------------------

SQUEUE_LETTERS = "aAbBcCdDeEfFgGhHiIjJkKlLmMnNoOpPqQrRsStTuUvVwWxXyYzZ"
SQUEUE_FIELDS = (
    "Account", "AccrueTime", "admin_comment", "AllocNodes", "AllocSID", "ArrayJobID", "ArrayTaskID", "AssocID",
    "BatchFlag", "BatchHost", "BoardsPerNode", "BurstBuffer", "BurstBufferState", "Cluster", "ClusterFeature",
    "Command", "Comment", "Contiguous", "Container", "Cores", "CoreSpec", "CPUsPerTask", "cpus-per-tres",
    "Deadline", "DelayBoot", "Dependency", "DerivedEC", "EligibleTime", "EndTime", "exit_code", "Feature",
    "GroupID", "GroupName", "HetJobID", "HetJobIDSet", "HetJobOffset", "JobArrayID", "JobID", "LastSchedEval",
    "Licenses", "MaxCPUs", "MaxNodes", "MCSLabel", "mem-per-tres", "MinCpus", "MinMemory", "MinTime",
    "MinTmpDisk", "Name", "Network", "Nice", "NodeList", "Nodes", "NTPerBoard", "NTPerCore", "NTPerNode",
    "NTPerSocket", "NumCPUs", "NumNodes", "NumTasks", "Origin", "OriginRAW", "OverSubscribe", "Partition",
    "PendingTime", "PreemptTime", "Prefer", "Priority", "PriorityLong", "Profile", "QOS", "Reason", "ReasonList",
    "Reboot", "ReqNodes", "ReqSwitch", "Requeue", "Reservation", "ResizeTime", "RestartCnt", "ResvPort",
    "SchedNodes", "SCT", "SelectJobInfo", "SiblingsActive", "SiblingsActiveRaw", "SiblingsViable",
    "SiblingsViableRaw", "Sockets", "SPerBoard", "StartTime", "State", "StateCompact", "STDERR", "STDIN",
    "STDOUT", "StepID", "StepName", "StepState", "SubmitTime", "system_comment", "Threads", "TimeLeft",
    "TimeLimit", "TimeUsed", "tres-alloc", "tres-bind", "tres-freq", "tres-per-job", "tres-per-node",
    "tres-per-socket", "tres-per-task", "UserID", "UserName", "Wait4Switch", "WCKey", "WorkDir",
)

for letter in SQUEUE_LETTERS:
    case(f"squeue -t all -o '%i %{letter}'", id=f"squeue -o %{letter}")
for name in SQUEUE_FIELDS:
    case(f"squeue -t all -O 'JobID,{name}'", id=f"squeue -O {name}")
for line in (
    "squeue", "squeue -h", "squeue -a", "squeue --all", "squeue -l", "squeue --long", "squeue -r", "squeue -ar",
    "squeue --array-unique", "squeue -t all", "squeue -t PD", "squeue -t R", "squeue -t running,pending",
    "squeue -t CD", "squeue -t F", "squeue -t CA", "squeue -t TO", "squeue --states=all", "squeue -t bogus",
    "squeue -j {running}", "squeue -j {running},{held}", "squeue --jobs={running}", "squeue -j {done}",
    "squeue -j 999999", "squeue -j {arr}", "squeue -j {arr}_2", "squeue -j {arr}_[1-2]", "squeue -j abc",
    "squeue -u root", "squeue -u nobody", "squeue --user=root", "squeue --users=root", "squeue -u nosuchuser",
    "squeue --me", "squeue -p gpu", "squeue -p nopart", "squeue --partition=gpu", "squeue -n held",
    "squeue --name=held,running", "squeue -w c000", "squeue -w c001", "squeue --nodelist=c[000-001]",
    "squeue -A acct", "squeue --account=acct", "squeue -q normal", "squeue --qos=normal", "squeue -s",
    "squeue --steps", "squeue -s {stepjob}.0", "squeue -s -j {stepjob}", "squeue -s -o '%i %j %A'",
    "squeue --noconvert", "squeue -P", "squeue --priority", "squeue -S i", "squeue -S -i", "squeue -S t,-i",
    "squeue --sort=P,i", "squeue --start", "squeue -L lic", "squeue --licenses=lic", "squeue -R resv",
    "squeue --reservation=resv", "squeue --hide", "squeue --local", "squeue --federation", "squeue --sibling",
    "squeue -M all", "squeue -M anchor", "squeue --clusters=anchor -h -o %i", "squeue -M nocluster",
    "squeue -v -h -j {held}", "squeue -V", "squeue --version", "squeue --usage", "squeue --bogus", "squeue -Z",
    "squeue -h -o %i -j {held}", "squeue -o '%.7i %.9P %.8j %.8u %.2t %.10M %.6D %R'", "squeue -o '%20i|%-5t|'",
    "squeue -O 'JobID:.5,Name:10,State:.12 ,Reason:4'", "squeue -O JobID -o %i", "squeue -O bogus",
    "squeue -o '%Y %%'", "squeue -U acct", "squeue -h -t all -o '%i %T %r' -j {dep}",
    "squeue --json -j 999999 | head -c 0", "squeue -i 1 -j {held} -h --iterate=1 | head -0",
):
    case(line)

# -- sinfo ----------------------------------------------------------------------------------------------

SINFO_LETTERS = "aAbBcCdDeEfFgGhHIlLmMnNoOpPrRsStTuUvVwXYZz"
SINFO_FIELDS = (
    "All", "AllocMem", "AllocNodes", "Available", "Cluster", "Comment", "Cores", "CPUs", "CPUsLoad", "CPUsState",
    "DefaultTime", "Disk", "Extra", "Features", "features_act", "FreeMem", "Gres", "GresUsed", "Groups",
    "MaxCPUsPerNode", "Memory", "NodeAddr", "NodeAI", "NodeAIOT", "NodeHost", "NodeList", "Nodes", "OverSubscribe",
    "Partition", "PartitionName", "Port", "PreemptMode", "PriorityJobFactor", "PriorityTier", "Reason", "Root",
    "Size", "SocketCoreThread", "Sockets", "StateCompact", "StateComplete", "StateLong", "Threads", "Time",
    "TimeStamp", "User", "UserLong", "Version", "Weight",
)
for letter in SINFO_LETTERS:
    case(f"sinfo -o '%P %{letter}'", id=f"sinfo -o %{letter}")
    case(f"sinfo -N -o '%N %{letter}'", id=f"sinfo -N -o %{letter}")
for name in SINFO_FIELDS:
    case(f"sinfo -O 'Partition,{name}'", id=f"sinfo -O {name}")
for line in (
    "sinfo", "sinfo -h", "sinfo --noheader", "sinfo -N", "sinfo --Node", "sinfo -l", "sinfo --long", "sinfo -Nl",
    "sinfo -s", "sinfo --summarize", "sinfo -R", "sinfo --list-reasons", "sinfo -r", "sinfo --responding",
    "sinfo -d", "sinfo --dead", "sinfo -e", "sinfo --exact", "sinfo -a", "sinfo --all", "sinfo -n c000",
    "sinfo --nodes=c[000-001]", "sinfo -n c9", "sinfo -p gpu", "sinfo -p nopart", "sinfo --partition=gpu",
    "sinfo -t idle", "sinfo -t drain", "sinfo -t mix", "sinfo -t alloc", "sinfo -t idle,mix", "sinfo -t bogus",
    "sinfo --states=drained", "sinfo -S P", "sinfo -S -N", "sinfo --sort=t", "sinfo -T", "sinfo --reservation",
    "sinfo --hide", "sinfo --local", "sinfo --federation", "sinfo --noconvert", "sinfo -M all",
    "sinfo --clusters=anchor", "sinfo -v", "sinfo -V", "sinfo --version", "sinfo --usage", "sinfo --bogus",
    "sinfo -o '%20N %.5D %t'", "sinfo -N -o '%N %c %m %G %t'", "sinfo -o '%N %G %t'", "sinfo -O bogus",
    "sinfo -O NodeList:30,StateLong:.12", "sinfo -i 1 | head -0",
):
    case(line)

# -- sacct ----------------------------------------------------------------------------------------------

SACCT_FIELDS = (
    "Account", "AdminComment", "AllocCPUS", "AllocNodes", "AllocTRES", "AssocID", "AveCPU", "AveCPUFreq",
    "AveDiskRead", "AveDiskWrite", "AvePages", "AveRSS", "AveVMSize", "BlockID", "Cluster", "Comment",
    "Constraints", "ConsumedEnergy", "ConsumedEnergyRaw", "Container", "CPUTime", "CPUTimeRAW", "DBIndex",
    "DerivedExitCode", "Elapsed", "ElapsedRaw", "Eligible", "End", "ExitCode", "Flags", "GID", "Group", "JobID",
    "JobIDRaw", "JobName", "Layout", "MaxDiskRead", "MaxDiskReadNode", "MaxDiskReadTask", "MaxDiskWrite",
    "MaxDiskWriteNode", "MaxDiskWriteTask", "MaxPages", "MaxPagesNode", "MaxPagesTask", "MaxRSS", "MaxRSSNode",
    "MaxRSSTask", "MaxVMSize", "MaxVMSizeNode", "MaxVMSizeTask", "McsLabel", "MinCPU", "MinCPUNode", "MinCPUTask",
    "NCPUS", "NNodes", "NodeList", "NTasks", "Partition", "Priority", "QOS", "QOSRAW", "Reason", "ReqCPUFreq",
    "ReqCPUFreqGov", "ReqCPUFreqMax", "ReqCPUFreqMin", "ReqCPUS", "ReqMem", "ReqNodes", "ReqTRES", "Reservation",
    "ReservationId", "Reserved", "ResvCPU", "ResvCPURAW", "Start", "State", "Submit", "SubmitLine", "Suspended",
    "SystemComment", "SystemCPU", "Timelimit", "TimelimitRaw", "TotalCPU", "TRESUsageInAve", "TRESUsageInMax",
    "TRESUsageInMaxNode", "TRESUsageInMaxTask", "TRESUsageInMin", "TRESUsageInMinNode", "TRESUsageInMinTask",
    "TRESUsageInTot", "TRESUsageOutAve", "TRESUsageOutMax", "TRESUsageOutMaxNode", "TRESUsageOutMaxTask",
    "TRESUsageOutMin", "TRESUsageOutMinNode", "TRESUsageOutMinTask", "TRESUsageOutTot", "UID", "User", "UserCPU",
    "WCKey", "WCKeyID", "WorkDir",
)
# the timed-out job is left out here: Slurm's jobacct_gather sampled its minute, which sets fields pslurm
# does not measure (AveRSS, TRESUsageIn...); it has cases of its own below
ENDED = "{done},{failed},{cancelled},{killed}"
for name in SACCT_FIELDS:
    case(f"sacct -n -P -j {ENDED} -o JobID,{name}", id=f"sacct -o {name}")
for name in ("State", "ExitCode", "Elapsed", "Timelimit", "TimelimitRaw", "End", "Reason", "DerivedExitCode"):
    case(f"sacct -n -P -X -j {{timeout}} -o JobID,{name}", id=f"sacct -X -o {name} of a timed-out job")
for line in (
    "sacct", "sacct -a", "sacct --allusers", "sacct -X", "sacct -aX", "sacct --allocations -a", "sacct -j {done}",
    "sacct -j {failed}", "sacct -j {timeout}", "sacct -j {cancelled}", "sacct -j {killed}", "sacct -j {running}",
    "sacct -j {held}", "sacct -j {stepjob}", "sacct -j {stepjob}.0", "sacct -j {done}.batch", "sacct -j 999999",
    "sacct -j {arr}", "sacct -j {arr}_1", "sacct -j abc", "sacct --jobs={done},{failed}", "sacct -j {done} -n",
    "sacct -j {done} --noheader", "sacct -j {done} -p", "sacct -j {done} --parsable", "sacct -j {done} -P",
    "sacct -j {done} --parsable2", "sacct -j {done} -P --delimiter=,", "sacct -j {done} -p --delimiter=';'",
    "sacct -j {done} -b", "sacct -j {done} --brief", "sacct -j {done} -l", "sacct -j {done} --long",
    "sacct -j {done} -L", "sacct -j {done} --allclusters", "sacct -j {done} -D", "sacct -j {done} --duplicates",
    "sacct -a -N c000 -X", "sacct -a --nodelist=c001 -X", "sacct -a -r gpu -X", "sacct -a --partition=nopart -X",
    "sacct -a -A acct -X", "sacct -a --accounts=acct", "sacct -j {done} -T", "sacct -j {done} --truncate",
    "sacct -j {done} -B", "sacct -j {done} --batch-script", "sacct -j {done} --env-vars", "sacct -c",
    "sacct --completion", "sacct -a -k 1 -X", "sacct -a --timelimit-min=1 -X", "sacct -a -K 2 -X",
    "sacct -a --timelimit-max=10 -X", "sacct -a -x 1 -X", "sacct -a --associations=1", "sacct -a -q normal -X",
    "sacct -a --qos=normal -X", "sacct -a -s CD -X", "sacct -a -s F,TO -X", "sacct -a --state=CA -X",
    "sacct -a -s R -X", "sacct -a -s bogus", "sacct -a -S 2000-01-01 -X", "sacct -a -S now-1hour -E now -X",
    "sacct -a --starttime=midnight -X", "sacct -a -E 2000-01-01", "sacct -a -S bogus", "sacct -j {done} --units=M",
    "sacct -j {done} --units=K -o JobID,ReqMem", "sacct -j {done} --noconvert", "sacct -a --name=done -X",
    "sacct -a --name=done,failed -X", "sacct -u root -X", "sacct --user=root -X", "sacct --uid=0 -X",
    "sacct -u nosuchuser", "sacct -a -g 0 -X", "sacct -a --group=root -X", "sacct -a -i 2 -X",
    "sacct -a --nnodes=1 -X", "sacct -a -I 1 -X", "sacct -a --ncpus=1-2 -X", "sacct -e", "sacct --helpformat",
    "sacct -M all -X", "sacct --clusters=anchor -X", "sacct -M nocluster", "sacct -a -C a100", "sacct -a -F x",
    "sacct -a --reason=None -X", "sacct -a -W wckey", "sacct --whole-hetjob=yes -j {done}", "sacct --federation",
    "sacct --local -X", "sacct --use-local-uid -X", "sacct -f /nonexistent", "sacct -v -j {done}",
    "sacct -V", "sacct --version", "sacct -U", "sacct --usage", "sacct --bogus", "sacct -t -a",
    "sacct -j {done} -o JobID%20,JobName%-15,State", "sacct -j {done} -o jobid,bogus",
    "sacct -j {done} --format=JobID,Elapsed,State", "sacct -j {done} --fields=JobID",
    "sacct --json -j 999999 | head -c 0",
):
    case(line)

# -- scontrol -------------------------------------------------------------------------------------------

for line in (
    "scontrol show job {running}", "scontrol show job {held}", "scontrol show job {dep}", "scontrol show job {rich}",
    "scontrol show job {done}", "scontrol show job {failed}", "scontrol show job {timeout}",
    "scontrol show job {cancelled}", "scontrol show job {killed}", "scontrol show job {gpujob}",
    "scontrol show job {multi}", "scontrol show job {stepjob}", "scontrol show job {arr}",
    "scontrol show job {arr}_2", "scontrol show job 999999", "scontrol show job abc", "scontrol show jobs {held}",
    "scontrol show jobid {held}", "scontrol show jobid={held}", "scontrol show JobId={held}",
    "scontrol show j {held}", "scontrol -d show job {running}", "scontrol --details show job {held}",
    "scontrol -dd show job {running}", "scontrol -o show job {held}", "scontrol --oneliner show job {running}",
    "scontrol -o show jobs", "scontrol show job", "scontrol show node c000", "scontrol show node c003",
    "scontrol show nodes c001", "scontrol show node", "scontrol show NodeName=c000", "scontrol show node c9",
    "scontrol -o show node c000", "scontrol -o show nodes", "scontrol show partition", "scontrol show part gpu",
    "scontrol show partition gpu", "scontrol show PartitionName=gpu", "scontrol show partition nopart",
    "scontrol -o show partition", "scontrol -a show partition", "scontrol --all show part",
    "scontrol show step {stepjob}.0", "scontrol show steps", "scontrol show step", "scontrol show step 999999.0",
    "scontrol -o show step {stepjob}.0", "scontrol show reservation", "scontrol show res",
    "scontrol show daemons", "scontrol show licenses", "scontrol show topology", "scontrol show hostnames c[000-002]",
    "scontrol show hostname c[000-001]", "scontrol show hostnames", "scontrol show hostlist c000,c001,c002",
    "scontrol show hostlist c000,c002", "scontrol show hostlistsorted c002,c000", "scontrol show frontend",
    "scontrol show federation", "scontrol show burstbuffer", "scontrol show aliases", "scontrol show bogus",
    "scontrol ping", "scontrol version", "scontrol -V", "scontrol --version", "scontrol -h | head -0",
    "scontrol --help | head -0", "scontrol --usage | head -0", "scontrol -Q show job 999999",
    "scontrol --quiet show job 999999",
    "scontrol -v show job {held}", "scontrol -M anchor show job {held}", "scontrol --clusters=anchor ping",
    "scontrol -M all show partition", "scontrol -F show node c000", "scontrol --future show node c000",
    "scontrol --hide show part", "scontrol --local show part", "scontrol --federation show part",
    "scontrol --sibling show job {held}", "scontrol -u 0 show job {held}", "scontrol bogus", "scontrol --bogus",
    "scontrol show", "scontrol listpids {running}", "scontrol listpids 999999", "scontrol pidinfo 1",
    "scontrol write batch_script {done} -", "scontrol write batch_script 999999 -", "scontrol write bogus",
    "scontrol wait_job {done}", "scontrol wait_job 999999", "scontrol show config | grep -c ClusterName",
    "scontrol show config | grep -E '^(ClusterName|MinJobAge|KillWait|MaxArraySize|MaxJobCount) '",
    "scontrol show hostnames c[000-001],c003", "scontrol update", "scontrol update JobId=999999 TimeLimit=5",
    "scontrol update JobId={held} Bogus=1", "scontrol hold 999999", "scontrol release 999999",
    "scontrol requeue 999999", "scontrol uhold 999999", "scontrol suspend 999999", "scontrol resume 999999",
    "scontrol top 999999", "scontrol notify 999999 hello", "scontrol requeuehold 999999", "scontrol hold abc",
    "scontrol show job {done} | grep -o 'TimeLimit=[^ ]*'", "scontrol show job {rich} | grep -o 'TimeLimit=[^ ]*'",
    "scontrol show job {held} | grep -o 'TimeLimit=[^ ]*'",
):
    case(line)

# -- sprio ----------------------------------------------------------------------------------------------

SPRIO_LETTERS = "aAbBcfFijJNpPrSqQuyYtT"
for letter in SPRIO_LETTERS:
    case(f"sprio -o '%i %{letter}'", id=f"sprio -o %{letter}")
for line in (
    "sprio", "sprio -h", "sprio --noheader", "sprio -l", "sprio --long", "sprio -n", "sprio --norm", "sprio -w",
    "sprio --weights", "sprio -j {held}", "sprio --jobs={held},{dep}", "sprio -j 999999", "sprio -j {running}",
    "sprio -u root", "sprio --user=root", "sprio --users=nobody", "sprio -p gpu", "sprio --partition=nopart",
    "sprio -S y", "sprio --sort=-i", "sprio -M all", "sprio --clusters=anchor", "sprio -v", "sprio -V",
    "sprio --version", "sprio --usage", "sprio --help | head -0", "sprio --federation", "sprio --local",
    "sprio --sibling", "sprio --bogus",
):
    case(line)

# -- scancel (reading: nothing to cancel) ---------------------------------------------------------------

for line in (
    "scancel 999999", "scancel {done}", "scancel {failed} {timeout}", "scancel 999999_1", "scancel {arr}_9",
    "scancel {done}.0", "scancel 999999.batch", "scancel 999999+0", "scancel abc", "scancel", "scancel -u nobody",
    "scancel --user=nobody", "scancel -n nosuchname", "scancel --name=nosuchname", "scancel --jobname=nosuchname",
    "scancel -p nopart", "scancel --partition=nopart", "scancel -w c002", "scancel --nodelist=c002",
    "scancel -A nosuchacct", "scancel --account=nosuchacct", "scancel -q nosuchqos", "scancel --qos=nosuchqos",
    "scancel -t SUSPENDED", "scancel --state=SUSPENDED", "scancel -t bogus -u root", "scancel -R resv -u nobody",
    "scancel --reservation=resv -u nobody", "scancel --wckey=wk -u nobody", "scancel -s USR1 999999",
    "scancel --signal=HUP 999999", "scancel -s BOGUS 999999", "scancel -b 999999", "scancel --batch 999999",
    "scancel -f 999999", "scancel --full 999999", "scancel -H 999999", "scancel --hurry 999999",
    "scancel --ctld 999999", "scancel -Q {done}", "scancel --quiet 999999", "scancel -v 999999",
    "scancel --verbose {done}", "scancel -M anchor 999999", "scancel --clusters=all 999999", "scancel -V",
    "scancel --version", "scancel --usage", "scancel --help | head -0", "scancel --me -n nosuchname",
    "scancel --sibling=anchor 999999", "scancel --bogus", "scancel -i -n nosuchname",
):
    case(line)

# -- the job commands: the options pslurm refused, the per-CPU and per-GPU sizes --------------------------

for line in (
    "sbatch -H --tasks-per-node=2 -N 1 -o /dev/null --wrap true", "sbatch -H --cluster=anchor -o /dev/null --wrap true",
    "sbatch -H --context=x -o /dev/null --wrap true", "sbatch -H --ntasks-per-tres=1 -o /dev/null --wrap true",
    "sbatch -H --mem-per-cpu=100 -n 2 -o /dev/null --wrap true",
    "sbatch -H --mem-per-gpu=100 --gres=gpu:1 -o /dev/null --wrap true",
    "sbatch -H --cpus-per-gpu=2 --gres=gpu:2 -o /dev/null --wrap true", "sbatch -H -M anchor -o /dev/null --wrap true",
    "sbatch -H --parsable -M anchor -o /dev/null --wrap true",
    "sbatch -H --clusters=anchor --parsable -o /dev/null --wrap true",
    "sbatch -H --parsable -o /dev/null --wrap true", "sbatch -H -J 'a b' -o /dev/null --wrap true",
    "sbatch -H --gres=gpu:9 -o /dev/null --wrap true", "sbatch -H -p nopart -o /dev/null --wrap true",
    "sbatch -H --mem-per-cpu=100 --mem=100 -o /dev/null --wrap true", "sbatch -H --frobnicate --wrap true",
    "sbatch -H -t 0:30 -o /dev/null --wrap true", "sbatch -H --array=0-2%1 -o /dev/null --wrap true",
):
    case(line, phase=1)
case("sbatch -H -o /dev/null", id="sbatch script on stdin", stdin="#!/bin/sh\n#SBATCH -J fromstdin\ntrue\n", phase=1)
case("sbatch -H -n 2 -c 2 -o /dev/null --wrap true > id && squeue -h -j $(cut -d' ' -f4 id) -o '%D %C %c'",
     id="sbatch -n 2 -c 2, held: its node count while pending", phase=1)
case("srun --tasks-per-node=1 -N 1 true", phase=1)
case("srun -n 1 --mem-per-cpu=10 echo ok", phase=1)
case("srun --cpus-per-gpu=1 --gres=gpu:1 echo ok", phase=1)
case("srun --mem-per-gpu=10 --gres=gpu:1 echo ok", phase=1)
case("srun -M anchor echo ok", phase=1)
case("srun --context=x --ntasks-per-tres=1 echo ok", phase=1)

# -- tools, their exact lines -----------------------------------------------------------------------------

SUBMITIT = """#!/bin/bash

# Parameters
#SBATCH --comment=test
#SBATCH --cpus-per-task=1
#SBATCH --error={dir}/submitit/%j_0_log.err
#SBATCH --gpus-per-node=1
#SBATCH --job-name=submitit
#SBATCH --mem=1GB
#SBATCH --nodes=1
#SBATCH --ntasks-per-node=1
#SBATCH --open-mode=append
#SBATCH --output={dir}/submitit/%j_0_log.out
#SBATCH --partition=gpu
#SBATCH --signal=USR2@90
#SBATCH --time=5
#SBATCH --wckey=submitit

# command
export SUBMITIT_EXECUTOR=slurm
srun --unbuffered --output {dir}/submitit/%j_%t_log.out --error {dir}/submitit/%j_%t_log.err true
"""
for line in (
    # submitit: submit a file, poll sacct, cancel, requeue
    "mkdir -p submitit && printf '%s' \"$SCRIPT\" > submitit/submission.sh && sbatch -H submitit/submission.sh",
    "sacct -o JobID,State,NodeList --parsable2 -j {done} -j {held}",
    "sacct -o JobID,State,NodeList --parsable2 -j {arr}",
    # snakemake's Slurm executor: status by sacct (or squeue), partitions, MinJobAge
    "sacct -X --parsable2 --clusters all --noheader --format=JobIdRaw,State --starttime 2000-01-01T00:00 "
    "--endtime now --name done",
    "squeue --format='%i|%T' --states=all --noheader --name done",
    "sinfo -o %P", "scontrol show partition", "scontrol show config | grep -E '^MinJobAge'",
    "sbatch --parsable --job-name run-uuid --output 'logs/%j.log' --export=ALL --comment rule_a -A root -p gpu "
    "-t 10 --mem 100 --nodes=1 -H --wrap='true'",
    "sbatch --parsable --job-name run-uuid --output 'logs/%j.log' --export=ALL --comment rule_b --clusters anchor "
    "-t 10 --mem-per-cpu 100 -H --cpus-per-task=1 /dev/stdin",
    # dask-jobqueue
    "sbatch -H dask.sh", "squeue --job {held} -h -o %T",
    # Nextflow
    "squeue --noheader -o '%i %t' -t all -p gpu -u root", "squeue --noheader -o '%i %t' -t all -p gpu --me",
    "sbatch -H .command.run",
    # parsl
    "sacct -X --noheader --format=jobid,state%20 --job '{done},{held}'",
    "squeue --noheader --format='%i %t' --job '{held}'",
    # Open OnDemand: every command with -M CLUSTER
    "squeue --all --states=all --noconvert -o $'\\x1e%a\\x1f%A\\x1f%B\\x1f%c\\x1f%C\\x1f%d\\x1f%D\\x1f%e\\x1f%E"
    "\\x1f%f\\x1f%F\\x1f%g\\x1f%G\\x1f%h\\x1f%H\\x1f%i\\x1f%I\\x1f%j\\x1f%J\\x1f%k\\x1f%K\\x1f%l\\x1f%L"
    "\\x1f%m\\x1f%M\\x1f%n\\x1f%N\\x1f%o\\x1f%O\\x1f%q\\x1f%P\\x1f%Q\\x1f%r\\x1f%S\\x1f%t\\x1f%T\\x1f%u"
    "\\x1f%U\\x1f%v\\x1f%V\\x1f%w\\x1f%W\\x1f%x\\x1f%X\\x1f%y\\x1f%Y\\x1f%z\\x1f%Z\\x1f%b' -j {held} -M anchor",
    "squeue --all --states=all --noconvert -o $'\\x1e%A\\x1f%i\\x1f%t' -j {held} -M anchor",
    "squeue --all --states=all --noconvert -o $'\\x1e%A\\x1f%i\\x1f%t' -u root -M anchor",
    "squeue --all --states=all --noconvert -o $'\\x1e%A\\x1f%i\\x1f%t' -j 999999 -M anchor",
    "sbatch -H -D {dir} -J ood -o ood.out --export NONE --parsable -M anchor",
    "scontrol hold {held} -M anchor", "scontrol release 999999 -M anchor", "scancel 999999 -M anchor",
    # Lightning (its SIGUSR1 handler requeues; it reads the node list)
    "scontrol show hostnames 'c[000-002]'", "scontrol requeue 999999",
    # prometheus-slurm-exporter (Go passes "-o %A|..." as one word)
    "squeue -a -r -h -o' %A|%a|%T|%C'", "sinfo -h -o' %C'", "sinfo -h -o' \"%n %G\"'",
    "sinfo -h -N -O NodeList,AllocMem,Memory,CPUsState,StateLong", "sinfo -h -o' %D,%T'", "sinfo -h -o%R,%C",
    "squeue -a -r -h -o%P --states=PENDING", "squeue -a -r -h -o' %A,%T,%r' --states=all",
    "squeue -a -r -h -o' %A|%u|%T|%C'", "sacct -a -X --format=Allocgres --state=RUNNING --noheader --parsable2",
):
    phase = 1 if line.startswith(("sbatch", "mkdir", "printf")) else 2 if line.startswith("scontrol hold") else 0
    stdin = ""
    if line.startswith("mkdir -p submitit"):
        line = line.replace('"$SCRIPT"', "'" + SUBMITIT.replace("'", "'\\''") + "'")
    if "/dev/stdin" in line:
        stdin = "#!/bin/sh\ntrue\n"
    if line.startswith("sbatch -H -D"):
        stdin = "#!/bin/bash\ntrue\n"
    if line == "sbatch -H dask.sh":
        line = ("printf '%s\\n' '#!/usr/bin/env bash' '#SBATCH -J dask-worker' '#SBATCH -e dask-%J.err' "
                "'#SBATCH -o dask-%J.out' '#SBATCH -p gpu' '#SBATCH -n 1' '#SBATCH --cpus-per-task=1' "
                "'#SBATCH --mem=1G' '#SBATCH -t 00:30:00' 'true' > dask.sh && sbatch -H dask.sh")
    if line == "sbatch -H .command.run":
        line = ("printf '%s\\n' '#!/bin/bash' '#SBATCH -J nf-proc' '#SBATCH -o {dir}/.command.log' "
                "'#SBATCH --no-requeue' '#SBATCH --signal B:USR2@30' '#SBATCH -c 1' '#SBATCH -t 00:10:00' "
                "'#SBATCH --mem 100M' '#SBATCH -p gpu' 'true' > .command.run && sbatch -H .command.run")
    command = "sbatch" if line.startswith(("printf", "mkdir")) else ""
    case(line, stdin=stdin, phase=phase, command=command,
         id=f"tool: {line}" if len(line) < 200 else f"tool: {line[:120]}...")

# -- what other clients trip on (issue 31): each as Slurm 22.05 answers it ---------------------------------

# the version, by every Slurm name `pslurm compat install` writes (clients gate features on its second word)
for name in ("sbatch", "srun", "salloc", "sacctmgr", "sshare", "sdiag", "sreport", "sstat"):
    for flag in ("-V", "--version"):
        case(f"{name} {flag}")
# every form of Slurm's parse_time (src/common/parse_time.c), looking back as sacct's -S and -E do
for form in ("0101", "01/01", "01.01", "010126", "01/01/26", "11/28-10:00", "2026-01-01T10:00", "midnight", "today",
             "noon", "fika", "teatime", "10:00", "now-1days", "now-2hours", "now-30minutes", "now-1week",
             "uts1700000000", "elevenses", "now-1h", "10am", "1301", "tomorrow"):
    case(f"sacct -a -X -n -S {form} -E now -o JobName,State", id=f"sacct -S {form}")
for line in ("sacct -a -X -n --starttime=010126 --endtime=now -o JobName", "sacct -a -X -n -S 0101 -E 12/31 -o JobName",
             "sacct -a -X -n -S now-1days -E today -o JobName", "sacct -a -X -n -E midnight -o JobName"):
    case(line)
# TRES per job and per node as slurmctld records them: --gpus is the job's (TRES_PER_JOB), --gres and
# --gpus-per-node each node's (TRES_PER_NODE); a GPU summary tool parses tres-per-node as per node
for option in ("--gpus=1", "--gpus=2 -N 2", "--gres=gpu:1", "--gpus-per-node=1"):
    case(f"sbatch -H {option} -o /dev/null --wrap true > id && j=$(cut -d' ' -f4 id) && "
         "squeue -h -j $j -O tres-per-node:20,tres-per-job:20,tres-per-task:20 && squeue -h -j $j -o %b && "
         "scontrol show job $j | grep -o 'TresPer[A-Za-z]*=[^ ]*'", id=f"sbatch -H {option}: its TRES per job and node",
         phase=1, command="sbatch")
# CPU time: sacct's TotalCPU of a job that burned CPU, per job and step (the figures measured, so their
# digits are masked: what is compared is that each line has a time, in Slurm's form)
BURNED = ("j=$(sbatch --parsable -o /dev/null --wrap 'timeout 2 sh -c \"while :; do :; done\"; true') && "
          "while squeue -h -j $j | grep -q .; do sleep 0.5; done; sleep 1; "
          "sacct -n -P -j $j -o JobID,{fields} | sed \"s/^$j/J/\" | sed -E 's/[0-9]/9/g'")
for fields in ("TotalCPU", "UserCPU,SystemCPU"):
    case(BURNED.format(fields=fields), id=f"sacct -o {fields} of a job that burned CPU", phase=1, command="sacct")
# scancel's signals: without -b/--full only the steps (the step ends CANCELLED 0:15, the script goes on and
# the job COMPLETES); -b the batch shell only; --full both
SIGNALLED = ("j=$(sbatch --parsable -o /dev/null --wrap 'srun sleep 300; echo after $?') && "
             "until squeue -h -s -j $j -o %i | grep -q \"^$j\\.0$\"; do sleep 0.3; done && scancel {flags} $j; "
             "echo rc=$?; while squeue -h -j $j | grep -q .; do sleep 0.5; done; sleep 1; "
             "sacct -n -P -j $j -o JobID,State,ExitCode {only}| sed \"s/^$j/J/\"")
case(SIGNALLED.format(flags="--signal=TERM", only=""), id="scancel --signal=TERM ID of a batch job running a step",
     phase=1, command="scancel")
for flags in ("-b --signal=TERM", "--batch -s USR1", "--full --signal=TERM", "-f -s TERM"):
    case(SIGNALLED.format(flags=flags, only="-X "), id=f"scancel {flags} ID of a batch job running a step",
         phase=1, command="scancel")

# -- changing and ending jobs (after every reader) ---------------------------------------------------------

for line in (
    "scontrol update JobId={held} TimeLimit=5 && scontrol show job {held} | grep -o 'TimeLimit=[^ ]*'",
    "scontrol update JobId={rich} Comment=changed && scontrol show job {rich} | grep -o 'Comment=[^ ]*'",
    "scontrol update JobId={held} NumNodes=1 ReqNodeList=c001 && scontrol show job {held} "
    "| grep -o 'ReqNodeList=[^ ]*'",
    "scontrol update JobId={held} ExcNodeList=c002 && scontrol show job {held} | grep -o 'ExcNodeList=[^ ]*'",
    "scontrol update JobId={held} Dependency=afterany:{done} && scontrol show job {held} | grep -o 'Dependency=[^ ]*'",
    "scontrol update JobId={held} QOS=normal Requeue=0 && scontrol show job {held} | grep -o 'Requeue=[^ ]*'",
    "scontrol update JobId={held} WorkDir=/tmp && scontrol show job {held} | grep -o 'WorkDir=[^ ]*'",
    "scontrol update JobId={held} StdOut=/tmp/x.out && scontrol show job {held} | grep -o 'StdOut=[^ ]*'",
    "scontrol update JobId={held} CPUsPerTask=2 && scontrol show job {held} | grep -o 'CPUs/Task=[^ ]*'",
    "scontrol update JobId={held} MinMemoryCPU=100 && scontrol show job {held} | grep -o 'MinMemoryCPU=[^ ]*'",
    "scontrol update JobId={held} MailType=END MailUser=root",
    "scontrol update JobId={held} Features=a100", "scontrol update JobId={held} Gres=gpu:1",
    "scontrol update JobId={held} StartTime=now+1hour", "scontrol update JobId={held} Deadline=2099-01-01T00:00:00",
    "scontrol update JobId={arr} ArrayTaskThrottle=1 && scontrol show job {arr}_0 | grep -o 'ArrayTaskThrottle=[^ ]*'",
    "scontrol update JobId={running} NumNodes=2",
    "scontrol top {held}", "scontrol notify {running} hello", "scontrol uhold {dep} && squeue -h -j {dep} -o '%r'",
    "scontrol release {dep} && squeue -h -j {dep} -o '%r'",
    "scontrol suspend {gpujob} && squeue -h -j {gpujob} -o '%T %r'",
    "scontrol resume {gpujob} && squeue -h -j {gpujob} -o '%T'",
    "scontrol requeuehold {multi}; sleep 3; squeue -h -j {multi} -o '%T %r'",
    "scontrol reconfigure",
    "sbatch -H -J victim -o /dev/null --wrap true > /dev/null && scancel -n victim && squeue -h -n victim -t all -o %T",
    "sbatch -H -J victim2 -o /dev/null --wrap true > /dev/null && scancel -t PD -n victim2 -u root "
    "&& squeue -h -n victim2 -t all -o %T",
    "sbatch -H -J victim3 -p gpu -o /dev/null --wrap true > /dev/null && scancel -p gpu -n victim3 -v",
    "sbatch -H -J victim4 -o /dev/null --wrap true > /dev/null && scancel --me -n victim4 && squeue -h -n victim4 "
    "-t all -o %T",
    "sbatch -H -J victim5 -o /dev/null --wrap true > /dev/null && echo n | scancel -i -n victim5; "
    "squeue -h -n victim5 -o %T",
    "scancel -b -s USR1 {running}", "scancel -f -s USR1 {running}", "scancel -s 0 {running}",
    "scancel {arr}_1 && squeue -h -t all -j {arr} -r -o '%i %T'",
    "scancel {stepjob}.0; sleep 1; squeue -h -s -j {stepjob}",
    "scancel -w c001 -u root; sleep 2; squeue -h -t all -j {multi} -o %T",
    "scancel -u root; sleep 2; squeue -h", "scancel {running} {gpujob}",
):
    case(line, phase=2)

CASES.sort(key=lambda c: c.phase)  # stable: the order above within each phase
