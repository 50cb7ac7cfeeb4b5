#!/bin/bash
# Idempotent single-machine Slurm 22.05 (Debian 12) cluster: the reference tests/conformance compares
# pslurm with. Adapted from the team's anchor (../shared/anchors/slurm/setup.sh): RESET=1 starts it from
# nothing (job ids from 1, an empty accounting database), multifactor priority so that sprio answers,
# MinJobAge=3600 so that ended jobs stay listed for a whole run of the suite.
#   4 virtual nodes c[000-003] (one slurmd each, distinct ports), 2 fake GPUs each.
#   Fallback (MULTI=0 or multi-slurmd fails): one node "$(hostname -s)" with gpu:4.
# Env knobs:
#   MULTI=1|0          multiple slurmd (default 1)
#   ACCT=dbd|none      slurmdbd+mariadb (apt-installed if missing; default) or accounting_storage/none + jobcomp/filetxt
#   TUNE=default|htc|lowlat   SchedulerParameters etc. (default "default"; htc = HTC-guide style with
#                      defer; lowlat = no defer, sched_min_interval=0, batch_sched_delay=0, bf_interval=1)
#   CPUS=8             CPUs advertised per virtual node (SlurmdParameters=config_overrides lets this
#                      exceed the 2 real cores, so that GPUs rather than CPUs bind; default 8)
#   FORCE=1            rewrite config and restart daemons even if running
#   FRESH=1            start slurmctld with -c (drop saved job state; job ids restart at 1)
#   RESET=1            stop every daemon, empty the accounting database and the saved state, start again
#   CONF_EXTRA=$'K=V\nK=V'  extra slurm.conf lines (AccountingStorageEnforce=... for tests/conformance/limits.py)
set -u
D=${SLURM_ANCHOR_STATE:-/var/tmp/slurm-anchor}; mkdir -p "$D"
MULTI=${MULTI:-1}; ACCT=${ACCT:-dbd}; TUNE=${TUNE:-default}; FORCE=${FORCE:-0}; CPUS=${CPUS:-8}; FRESH=${FRESH:-0}
RESET=${RESET:-0}
HERE=$(cd "$(dirname "$0")" && pwd)
if [ "$RESET" = 1 ]; then KEEP_MUNGE=1 bash "$HERE/stop.sh" >/dev/null; FRESH=1; fi
HOST=$(hostname -s)
ETC=/etc/slurm
LOG=/var/log/slurm
PIDS=$D/pids
NODES="c000 c001 c002 c003"
BASEPORT=17000

alive() { [ -n "${1:-}" ] && kill -0 "$1" 2>/dev/null; }
pidof_file() { [ -f "$1" ] && cat "$1" 2>/dev/null; }

# ---------------- packages (a fresh machine has none of them) ----------------
need=()
for p in slurmctld slurmd slurm-client munge; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ "${#need[@]}" -gt 0 ]; then
  apt-get update -q >/dev/null 2>&1
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null || { echo "apt-get install ${need[*]} failed"; exit 1; }
fi

# ---------------- munge ----------------
mkdir -p /run/munge /var/log/munge /var/lib/munge
chown munge:munge /run/munge /var/log/munge /var/lib/munge
chmod 0755 /run/munge
if [ ! -s /etc/munge/munge.key ]; then
  dd if=/dev/urandom bs=1 count=1024 of=/etc/munge/munge.key 2>/dev/null
fi
chown munge:munge /etc/munge/munge.key; chmod 0400 /etc/munge/munge.key
MPID=$(pidof_file /run/munge/munged.pid)
if ! alive "$MPID"; then
  rm -f /run/munge/munged.pid /run/munge/munge.socket.2*
  runuser -u munge -- /usr/sbin/munged
  sleep 0.5
  MPID=$(pidof_file /run/munge/munged.pid)
fi
munge -n | unmunge >/dev/null || { echo "munge self-test failed"; exit 1; }

# ---------------- fake GPU device nodes ----------------
for i in 0 1 2 3 4 5 6 7; do
  [ -e /dev/nvidia$i ] || mknod -m 666 /dev/nvidia$i c 195 $i
done

# ---------------- optional slurmdbd (mariadb) ----------------
if [ "$ACCT" = dbd ]; then
  if ! command -v slurmdbd >/dev/null || ! command -v mariadbd >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurmdbd mariadb-server >/dev/null
  fi
  DBPID=$(pidof_file /run/mysqld/mysqld.pid)
  if ! alive "$DBPID"; then
    mkdir -p /run/mysqld; chown mysql:mysql /run/mysqld
    # loopback only, no TCP needed (unix socket) but bind to 127.0.0.1 anyway
    nohup setsid /usr/sbin/mariadbd --user=mysql --bind-address=127.0.0.1 \
       --pid-file=/run/mysqld/mysqld.pid >/var/log/mysqld-anchor.log 2>&1 < /dev/null &
    for i in $(seq 1 60); do mariadb -e 'select 1' >/dev/null 2>&1 && break; sleep 0.5; done
    DBPID=$(pidof_file /run/mysqld/mysqld.pid)
  fi
  [ "$RESET" = 1 ] && mariadb -e "DROP DATABASE IF EXISTS slurm_acct_db;"
  mariadb -e "CREATE DATABASE IF NOT EXISTS slurm_acct_db; CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmpw'; GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost'; FLUSH PRIVILEGES;"
  cat > $ETC/slurmdbd.conf <<EOC
AuthType=auth/munge
DbdHost=localhost
DbdAddr=127.0.0.1
DbdPort=6819
SlurmUser=root
DebugLevel=info
LogFile=$LOG/slurmdbd.log
PidFile=/run/slurmdbd.pid
StorageType=accounting_storage/mysql
StorageHost=localhost
StorageUser=slurm
StoragePass=slurmpw
StorageLoc=slurm_acct_db
EOC
  chmod 600 $ETC/slurmdbd.conf
  DBDPID=$(pidof_file /run/slurmdbd.pid)
  if ! alive "$DBDPID"; then
    /usr/sbin/slurmdbd
    for i in $(seq 1 40); do ss -ltn 2>/dev/null | grep -q ':6819 ' && break; sleep 0.5; done
    DBDPID=$(pidof_file /run/slurmdbd.pid)
  fi
fi

# ---------------- slurm.conf / gres.conf ----------------
mkdir -p $ETC $LOG /var/spool/slurmctld /var/spool/slurmd
DBG=info
case "$TUNE" in
  default) SCHED="" ; EXTRA="" ;;
  htc)     # high-throughput settings after https://slurm.schedmd.com/high_throughput.html
           SCHED="SchedulerParameters=defer,sched_min_interval=100000,batch_sched_delay=10,default_queue_depth=1000,max_rpc_cnt=400,bf_interval=10,bf_continue"
           EXTRA="MessageTimeout=30
MinJobAge=30"
           DBG=error ;;
  lowlat)  # no defer: event-driven scheduling with no rate limit (small-cluster latency tuning)
           SCHED="SchedulerParameters=default_queue_depth=1000,sched_min_interval=0,batch_sched_delay=0,bf_interval=1,bf_continue"
           EXTRA="MessageTimeout=30
MinJobAge=30"
           DBG=error ;;
  *) echo "unknown TUNE=$TUNE"; exit 1 ;;
esac
if [ "$ACCT" = dbd ]; then
  ACCTCONF="AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
AccountingStorageTRES=gres/gpu
JobAcctGatherType=jobacct_gather/linux
JobCompType=jobcomp/none"
else
  ACCTCONF="AccountingStorageType=accounting_storage/none
JobAcctGatherType=jobacct_gather/none
JobCompType=jobcomp/filetxt
JobCompLoc=$LOG/jobcomp.txt"
fi

NEWCONF=$(mktemp)
{
cat <<EOC
# generated by $D/setup.sh  MULTI=$MULTI ACCT=$ACCT TUNE=$TUNE CPUS=$CPUS
ClusterName=anchor
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
CredType=cred/munge
SlurmUser=root
SlurmdUser=root
StateSaveLocation=/var/spool/slurmctld
SlurmdSpoolDir=/var/spool/slurmd/%n
SlurmctldPidFile=/run/slurmctld.pid
SlurmdPidFile=/run/slurmd-%n.pid
SlurmctldLogFile=$LOG/slurmctld.log
SlurmdLogFile=$LOG/slurmd-%n.log
SlurmctldDebug=$DBG
SlurmdDebug=$DBG
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SwitchType=switch/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
MailProg=/bin/true
SlurmdParameters=config_overrides
# bind daemons to the address the host name resolves to (127.0.0.1 here) instead of INADDR_ANY
CommunicationParameters=NoInAddrAny
MaxJobCount=20000
MaxArraySize=10001
PriorityType=priority/multifactor
MinJobAge=3600
$ACCTCONF
$SCHED
$EXTRA
${CONF_EXTRA:-}
EOC
if [ "$MULTI" = 1 ]; then
  p=$BASEPORT
  for n in $NODES; do
    echo "NodeName=$n NodeHostname=$HOST NodeAddr=127.0.0.1 Port=$p CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=4000 Gres=gpu:2 State=UNKNOWN"
    p=$((p+1))
  done
  echo "PartitionName=gpu Nodes=c[000-003] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO"
else
  echo "NodeName=$HOST NodeAddr=127.0.0.1 CPUs=$CPUS Boards=1 SocketsPerBoard=1 CoresPerSocket=$CPUS ThreadsPerCore=1 RealMemory=16000 Gres=gpu:4 State=UNKNOWN"
  echo "PartitionName=gpu Nodes=$HOST Default=YES MaxTime=INFINITE State=UP"
fi
} | awk 'NF' > $NEWCONF
# (awk drops the empty SCHED/EXTRA lines of the default config)

NEWGRES=$(mktemp)
{
echo "AutoDetect=off"
if [ "$MULTI" = 1 ]; then
  i=0
  for n in $NODES; do
    echo "NodeName=$n Name=gpu File=/dev/nvidia[$i-$((i+1))]"; i=$((i+2))
  done
else
  echo "NodeName=$HOST Name=gpu File=/dev/nvidia[0-3]"
fi
} > $NEWGRES

CHANGED=0
cmp -s $NEWCONF $ETC/slurm.conf || CHANGED=1
cmp -s $NEWGRES $ETC/gres.conf || CHANGED=1
[ "$FORCE" = 1 ] && CHANGED=1
cp $NEWCONF $ETC/slurm.conf; cp $NEWGRES $ETC/gres.conf; rm -f $NEWCONF $NEWGRES
# cgroup.conf not needed (no cgroup plugins), but silence warnings
[ -f $ETC/cgroup.conf ] || echo "CgroupPlugin=autodetect" > $ETC/cgroup.conf

if [ "$MULTI" = 1 ]; then DNODES=$NODES; else DNODES=$HOST; fi

stop_slurm() {
  for f in /run/slurmd-*.pid /run/slurmctld.pid; do
    p=$(pidof_file $f); alive "$p" && kill "$p"
  done
  for i in $(seq 1 40); do
    any=0; for f in /run/slurmd-*.pid /run/slurmctld.pid; do p=$(pidof_file $f); alive "$p" && any=1; done
    [ $any = 0 ] && break; sleep 0.25
  done
  rm -f /run/slurmd-*.pid /run/slurmctld.pid
}
if [ $CHANGED = 1 ]; then
  echo "config changed -> (re)starting slurm daemons"
  stop_slurm
fi

# ---------------- start daemons ----------------
CPID=$(pidof_file /run/slurmctld.pid)
if [ "$RESET" = 1 ]; then rm -rf /var/spool/slurmctld/*; fi
if ! alive "$CPID"; then
  # a slurmctld just stopped may hold its port a moment longer (a busy machine): wait for it
  for i in $(seq 1 120); do ss -ltn 2>/dev/null | grep -q ':6817 ' || break; sleep 0.25; done
  # -c: clear saved job state (fresh job ids) only on request
  if [ "$FRESH" = 1 ]; then /usr/sbin/slurmctld -c -i; else /usr/sbin/slurmctld -i; fi
  for i in $(seq 1 40); do scontrol ping 2>/dev/null | grep -q UP && break; sleep 0.25; done
  CPID=$(pidof_file /run/slurmctld.pid)
  alive "$CPID" || { echo "slurmctld failed to start:"; tail -5 $LOG/slurmctld.log; exit 1; }
fi
for n in $DNODES; do
  mkdir -p /var/spool/slurmd/$n
  p=$(pidof_file /run/slurmd-$n.pid)
  if ! alive "$p"; then
    if [ "$MULTI" = 1 ]; then /usr/sbin/slurmd -N $n; else /usr/sbin/slurmd; fi
  fi
done
sleep 1
for i in $(seq 1 40); do
  st=$(sinfo -h -o '%t' 2>/dev/null)
  echo "$st" | grep -qE 'idle|mix|alloc' && ! echo "$st" | grep -qE 'unk|down|drain|inval' && break
  sleep 0.5
done

# ---------------- record pids ----------------
{
  echo "munged $(pidof_file /run/munge/munged.pid)"
  [ "$ACCT" = dbd ] && echo "mariadbd $(pidof_file /run/mysqld/mysqld.pid)" && echo "slurmdbd $(pidof_file /run/slurmdbd.pid)"
  echo "slurmctld $(pidof_file /run/slurmctld.pid)"
  for n in $DNODES; do echo "slurmd[$n] $(pidof_file /run/slurmd-$n.pid)"; done
} > $PIDS
cat $PIDS
sinfo
