#!/usr/bin/env bash
# Packing small training jobs on one GPU (issue 30): N copies (4) of bench/gpu_train.py (a 3-layer MLP,
# batch 256, STEPS steps, 2 GiB ballast) one after another on whole GPUs (--gres=gpu:1) vs packed in
# --gpu-mem=12G slices vs MPS (--gres=mps:25) vs --gpu-mem=auto. Prints, per way, a line
#   makespan <how>: <seconds> s, GPU util <min>-<max> %
# (the util of each job as psacct records it) and the psacct lines behind it; docs/benchmarks.md has
# the H200's figures.
#
#   bench/gpu_packing.sh BIN [OUTDIR]      # BIN: pslurm's console scripts; python3 with torch on PATH (or PY=)
#
# On the cluster $PSLURM_CONF names when it is set (tests/gpu/run.sh's, PSLURM_GPU_PACKING=1), else on
# one of its own: one node with the machine's GPUs (AutoDetect=nvml), Gres=gpu:N,mps:N*100, brought up
# and down here.
set -u
BIN=${1:?usage: gpu_packing.sh BIN [OUTDIR]}
OUTD=${2:-$(mktemp -d "${TMPDIR:-/tmp}/gpu-packing.XXXXXX")}
STEPS=${STEPS:-20000}; N=${N:-4}
PY=${PY:-$(command -v python3)}
here=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUTD"; chmod 755 "$OUTD"
cp "$here/gpu_train.py" "$OUTD/train.py"; chmod 644 "$OUTD/train.py"
own=""
if [ -z "${PSLURM_CONF:-}" ]; then
  gpus=$(nvidia-smi -L | grep -c '^GPU ')
  own="$OUTD/state"; mkdir -p "$OUTD/conf"
  printf 'ClusterName=gpubench\nSlurmdTimeout=8\nNodeName=g0 CPUs=%s RealMemory=100000 Gres=gpu:%s,mps:%s\nPartitionName=gpu Nodes=ALL Default=YES\n' \
    "$(nproc)" "$gpus" $((gpus * 100)) >"$OUTD/conf/pslurm.conf"
  printf 'AutoDetect=nvml\nName=mps Count=%s\n' $((gpus * 100)) >"$OUTD/conf/gres.conf"
  printf 'ConstrainDevices=yes\n' >"$OUTD/conf/cgroup.conf"
  "$BIN/pslurm" up --conf "$OUTD/conf/pslurm.conf" --state-dir "$own" >"$OUTD/up.log" 2>&1 || { tail -n 3 "$OUTD/up.log"; exit 1; }
  export PSLURM_CONF="$own/pslurm.conf"
  trap '"$BIN/pslurm" down --state-dir "$own" >/dev/null 2>&1' EXIT
fi
now() { date +%s.%N; }

run_mode() {  # name, psbatch options: the N jobs' makespan, their psacct lines
  local mode=$1 ids=() t0 t1 left list
  shift
  t0=$(now)
  for _ in $(seq 1 "$N"); do
    ids+=("$("$BIN/psbatch" --parsable "$@" -J train -o "$OUTD/$mode-%j.json" --wrap "$PY $OUTD/train.py $STEPS")")
  done
  list=$(IFS=,; echo "${ids[*]}")
  local end=$((SECONDS + 900))
  while [ $SECONDS -lt $end ]; do
    left=$("$BIN/psqueue" -h -t PD,R,CG -j "$list" -o %i 2>/dev/null | wc -l)
    [ "$left" = 0 ] && break
    sleep 0.5
  done
  t1=$(now)
  "$BIN/psacct" -j "$list" -X -n -P -o JobID,State,Elapsed,AllocTRES,GPUMemPeak,GPUUtil >"$OUTD/$mode.acct"
  local util states
  util=$(cut -d'|' -f6 "$OUTD/$mode.acct" | tr -d '%' | grep -v '^$' | sort -n | sed -n '1p;$p' | paste -sd '-')
  states=$(cut -d'|' -f2 "$OUTD/$mode.acct" | sort | uniq -c | awk '{printf "%s%s %s", (NR>1?", ":""), $1, $2}')
  echo "makespan $mode ($*): $(awk -v a="$t0" -v b="$t1" 'BEGIN{printf "%.1f", b-a}') s, GPU util ${util:-?} %, $states"
  cat "$OUTD/$mode.acct"
  ! grep -qv '|COMPLETED|' "$OUTD/$mode.acct"
}

status=0
run_mode exclusive --gres=gpu:1 || status=1
run_mode gpumem --gpu-mem=12G || status=1
run_mode mps --gres=mps:25 || status=1
run_mode auto --gpu-mem=auto || status=1
exit $status
