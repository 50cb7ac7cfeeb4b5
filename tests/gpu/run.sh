#!/usr/bin/env bash
# The whole GPU validation of docs/gpu-validation.md in one go, on the machine it runs on: discovery,
# pslurm doctor --gpu (isolation with a real CUDA program in a probe job), jobs with and without GPUs
# under their device cgroup, two --gpu-mem jobs sharing one GPU with torch, an overrun stopped, MPS,
# usage in psacct; with PSLURM_GPU_PACKING=1 also the packing bench (bench/gpu_packing.sh: four small
# training jobs on whole GPUs, --gpu-mem slices, MPS and --gpu-mem=auto). One line per step (PASS / FAIL /
# SKIP, with what it saw), then the same as a Markdown table (for docs/gpu-validation.md) and a summary;
# exit 1 when a step failed.
#
#   sudo tests/gpu/run.sh            # root: device isolation needs it
#   PSLURM_BIN=/opt/pslurm/bin tests/gpu/run.sh
#   PSLURM_GPU_PACKING=1 tests/gpu/run.sh      # and the packing bench (a few minutes; needs torch)
#
# CI runs it on a GPU stand-in (tests/acceptance/test_gpu_run_script.py: the fake NVML, nvidia-smi, the
# CUDA driver, torch and MPS of tests/gpu/standin/), so a change of what the commands print breaks CI.
#
# Without a GPU (no nvidia-smi, or it lists none) it says so and checks the rest: pslurm doctor on a
# local cluster of simulated GPUs. Nothing is left behind: the cluster lives in a temporary directory
# and goes down at the end. Needs: pslurm installed (PSLURM_BIN, else .venv/bin beside this file's
# repository, else PATH) with nvidia-ml-py; torch for the torch steps (skipped without it).
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
BIN=${PSLURM_BIN:-}
if [ -z "$BIN" ]; then
  if [ -x "$here/.venv/bin/pslurm" ]; then BIN="$here/.venv/bin"; else BIN=$(dirname "$(command -v pslurm)"); fi
fi
PY="$BIN/python"
[ -x "$PY" ] || PY=$(command -v python3)
work=$(mktemp -d "${TMPDIR:-/tmp}/pslurm-gpu-run.XXXXXX")
chmod 755 "$work"
state="$work/state"
held=0; failed=0; skipped=0
rows=()  # the Markdown table's rows

say() { printf '%-4s  %-18s %s\n' "$1" "$2" "$3"; rows+=("| $2 | $1 | ${3//|/\\|} |"); }
held()    { held=$((held + 1)); say PASS "$1" "$2"; }
failed()  { failed=$((failed + 1)); say FAIL "$1" "$2"; }
skipped() { skipped=$((skipped + 1)); say SKIP "$1" "$2"; }
summary() {  # what it ran on: the table, then the last line
  printf '\n| step | result | what it saw |\n| --- | --- | --- |\n'
  printf '%s\n' "${rows[@]}"
  echo "summary: $held passed, $failed failed, $skipped skipped ($1)"
}
cleanup() {
  "$BIN/pslurm" down --state-dir "$state" >/dev/null 2>&1
  rm -rf "$work"
}
trap cleanup EXIT
export PSLURM_CONF="$state/pslurm.conf"
q() { "$BIN/psqueue" -h -t all -j "$1" -o "$2" 2>/dev/null | head -n 1; }
wait_state() {  # job, states (regex), seconds: the state once it matches, else the last seen
  local end=$((SECONDS + $3)) st=""
  while [ $SECONDS -lt $end ]; do
    st=$(q "$1" %T)
    [[ "$st" =~ ^($2)$ ]] && break
    sleep 0.5
  done
  echo "$st"
}
torch_here() { "$PY" -c 'import torch' >/dev/null 2>&1; }
gpu_of() {  # the GPU index a job holds: pscontrol -d show job's GRES=...(IDX:N), as scontrol -d prints it
  "$BIN/pscontrol" -d show job "$1" | grep -o 'GRES=[^ ]*(IDX:[0-9,-]*)' | head -n 1 | sed 's/.*IDX:\([0-9,-]*\))/\1/'
}

echo "pslurm GPU validation on $(hostname) ($(uname -r)), $(date -u +%Y-%m-%dT%H:%M:%SZ), pslurm from $BIN"
[ "$(id -u)" = 0 ] || echo "note: not root: device isolation and the probe jobs need root; those steps will fail"
if stat -fc %T /sys/fs/cgroup 2>/dev/null | grep -q cgroup2; then cgmode="cgroup v2"; else cgmode="cgroup v1"; fi
gpus=0
if command -v nvidia-smi >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU ')
fi

if [ "$gpus" = 0 ]; then
  echo "no GPU on this machine (nvidia-smi $(command -v nvidia-smi >/dev/null && echo 'lists none' || echo 'not found')): the GPU steps are skipped; checking the rest"
  if "$BIN/pslurm" up --nodes 1 --gpus-per-node 2 --state-dir "$state" >"$work/up.log" 2>&1; then
    held up "a local cluster of simulated GPUs ($cgmode)"
  else
    failed up "$(tail -n 1 "$work/up.log")"
  fi
  if "$BIN/pslurm" doctor -N c000 >"$work/doctor.log" 2>&1; then
    held doctor "$(tail -n 1 "$work/doctor.log")"
  else
    failed doctor "$(grep '^FAIL' "$work/doctor.log" | head -n 3 | tr '\n' ' ')"
  fi
  if "$BIN/pslurm" doctor -N c000 --gpu 2>&1 | grep -q '^skip cuda: no GPU on this machine'; then
    held "doctor --gpu" "says there is no GPU, and checks the rest"
  else
    failed "doctor --gpu" "did not say there is no GPU"
  fi
  for step in discovery isolation binding sharing overrun mps usage packing; do skipped "$step" "no GPU"; done
  summary "no GPU on this machine"
  [ "$failed" = 0 ]
  exit
fi

# -- a GPU host --------------------------------------------------------------------------------------
driver=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader | head -n 1)
model=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n 1)
echo "$gpus x $model, driver $driver, $cgmode, torch: $(torch_here && "$PY" -c 'import torch; print(torch.__version__)' || echo none)"
mkdir -p "$work/conf"
mps=$((gpus * 100))
cat >"$work/conf/pslurm.conf" <<EOF
ClusterName=gpuval$$
SlurmdTimeout=8
NodeName=g0 CPUs=$(nproc) RealMemory=1000 Gres=gpu:$gpus,mps:$mps
PartitionName=gpu Nodes=ALL Default=YES
EOF
printf 'AutoDetect=nvml\nName=mps Count=%s\n' "$mps" >"$work/conf/gres.conf"
printf 'ConstrainDevices=yes\n' >"$work/conf/cgroup.conf"

# 1. discovery: psd -G lists each GPU nvidia-smi does, by UUID
"$BIN/psd" -f "$work/conf/pslurm.conf" -N g0 -G >"$work/gres.out" 2>&1
found=$(grep -c '^Name=gpu' "$work/gres.out")
missing=$(nvidia-smi --query-gpu=uuid --format=csv,noheader | while read -r u; do grep -q "$u" "$work/gres.out" || echo "$u"; done)
if [ "$found" = "$gpus" ] && [ -z "$missing" ]; then
  held discovery "psd -G: $found GPUs, every UUID nvidia-smi lists"
else
  failed discovery "psd -G found $found of $gpus (missing: ${missing:-none}): $(head -n 2 "$work/gres.out" | tr '\n' ' ')"
fi

if ! "$BIN/pslurm" up --conf "$work/conf/pslurm.conf" --state-dir "$state" >"$work/up.log" 2>&1; then
  failed up "$(tail -n 1 "$work/up.log")"
  summary "$gpus x $model, driver $driver, $cgmode"
  exit 1
fi
isolation=$("$BIN/pscontrol" show node g0 | grep -o 'DeviceIsolation=[^ ]*.*' | head -n 1)
held up "node g0 up, $isolation"

# 2. doctor --gpu: the probe jobs, a CUDA program in each seeing exactly its GPU
if "$BIN/pslurm" doctor -N g0 --gpu >"$work/doctor.log" 2>&1; then
  held doctor "$(grep -c '^ok   cuda' "$work/doctor.log") GPU(s) probed: each CUDA program saw exactly its GPU"
else
  failed doctor "$(grep '^FAIL' "$work/doctor.log" | head -n 3 | tr '\n' ' ')"
fi

# 3. isolation with real jobs: none without GPUs, exactly one with one
none=$("$BIN/psrun" sh -c 'nvidia-smi -L 2>/dev/null | grep -c "^GPU "' 2>/dev/null)
one=$("$BIN/psrun" --gres=gpu:1 sh -c 'nvidia-smi -L | grep -c "^GPU "' 2>/dev/null)
if [ "${none:-0}" = 0 ] && [ "$one" = 1 ]; then
  held isolation "a job without GPUs sees none, one with --gres=gpu:1 exactly one (nvidia-smi)"
else
  failed isolation "nvidia-smi in a job: without GPUs ${none:-?}, with one ${one:-?}"
fi
if torch_here; then
  t0=$("$BIN/psrun" "$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null)
  t1=$("$BIN/psrun" --gres=gpu:1 "$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null)
  if [ "$t0" = 0 ] && [ "$t1" = 1 ]; then held "isolation (torch)" "device_count 0 without GPUs, 1 with one"
  else failed "isolation (torch)" "device_count without GPUs: ${t0:-?}, with one: ${t1:-?}"; fi
else
  skipped "isolation (torch)" "torch is not installed"
fi

# 4. binding: with one GPU held, the next job gets another, by UUID
if [ "$gpus" -ge 2 ]; then
  hold=$("$BIN/psbatch" --parsable --gres=gpu:1 -o /dev/null --wrap 'nvidia-smi -L > '"$work"'/held.txt; sleep 60')
  wait_state "$hold" RUNNING 30 >/dev/null
  sleep 2
  other=$("$BIN/psrun" --gres=gpu:1 nvidia-smi -L 2>/dev/null | grep -o 'UUID: [^)]*')
  first=$(grep -o 'UUID: [^)]*' "$work/held.txt" 2>/dev/null)
  "$BIN/pscancel" "$hold"
  if [ -n "$first" ] && [ -n "$other" ] && [ "$first" != "$other" ]; then
    held binding "two jobs, two GPUs ($first / $other)"
  else
    failed binding "the second job saw ${other:-nothing}, the first ${first:-nothing}"
  fi
else
  skipped binding "one GPU"
fi

# 5. two --gpu-mem slices sharing one GPU, each holding 4 GiB with torch
if torch_here; then
  alloc='import torch,time; x=torch.empty(4*1024**3, dtype=torch.uint8, device="cuda"); time.sleep(40)'
  a=$("$BIN/psbatch" --parsable --gpu-mem=6G -o "$work/a.out" --wrap "$PY -c '$alloc'")
  b=$("$BIN/psbatch" --parsable --gpu-mem=6G -o "$work/b.out" --wrap "$PY -c '$alloc'")
  sa=$(wait_state "$a" RUNNING 60); sb=$(wait_state "$b" RUNNING 60)
  sleep 5
  ga=$(gpu_of "$a"); gb=$(gpu_of "$b")
  procs=$(nvidia-smi --query-compute-apps=pid --format=csv,noheader | wc -l)
  "$BIN/pscancel" "$a" "$b"
  if [ "$sa" = RUNNING ] && [ "$sb" = RUNNING ] && [ -n "$ga" ] && [ "$ga" = "$gb" ] && [ "$procs" -ge 2 ]; then
    held sharing "two --gpu-mem=6G jobs running at once on one GPU (IDX:$ga), $procs CUDA processes"
  else
    failed sharing "states $sa / $sb, GPUs ${ga:-?} / ${gb:-?}, $procs CUDA processes"
  fi
  # 6. an overrun: 4 GiB in a 2 GiB slice ends OUT_OF_MEMORY with the reason, in SystemComment and in the
  # job's stderr (with MPS configured CUDA refuses the allocation in the job; without, the agent's watch ends it)
  c=$("$BIN/psbatch" --parsable --gpu-mem=2G -o "$work/c.out" --wrap "$PY -c '$alloc'")
  sc=$(wait_state "$c" 'OUT_OF_MEMORY|COMPLETED|FAILED|CANCELLED' 90)
  why=$("$BIN/psacct" -j "$c" -X -n -P -o SystemComment | head -n 1)
  note=$(grep -m 1 '^slurmstepd: error: .*\(MPS refused\|GPU memory use\)' "$work/c.out" 2>/dev/null)
  if [ "$sc" = OUT_OF_MEMORY ] && [ -n "$why" ] && [ -n "$note" ]; then
    held overrun "ended OUT_OF_MEMORY: SystemComment=$why; stderr: ${note#slurmstepd: error: }"
  else
    failed overrun "ended $sc: SystemComment=${why:-none}; stderr: $(tail -n 1 "$work/c.out" 2>/dev/null)"
  fi
else
  skipped sharing "torch is not installed"
  skipped overrun "torch is not installed"
fi

# 7. MPS: a job with --gres=mps:50 gets its share, the control daemon runs for it and goes after it
if command -v nvidia-cuda-mps-control >/dev/null 2>&1; then
  pct=$("$BIN/psrun" --gres=mps:50 sh -c 'pgrep -f nvidia-cuda-mps-control >/dev/null && echo $CUDA_MPS_ACTIVE_THREAD_PERCENTAGE' 2>/dev/null)
  sleep 3
  if [ "$pct" = 50 ] && ! pgrep -f nvidia-cuda-mps-control >/dev/null; then
    held mps "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 under a running control daemon, gone after the job"
  else
    failed mps "thread percentage ${pct:-none}; daemon after the job: $(pgrep -f nvidia-cuda-mps-control >/dev/null && echo running || echo gone)"
  fi
else
  skipped mps "nvidia-cuda-mps-control is not installed"
fi

# 8. usage: a job's GPU-seconds, memory peak and utilisation in psacct
if torch_here; then
  work_py='import torch,time; x=torch.empty(2*1024**3, dtype=torch.uint8, device="cuda"); a=torch.randn(4096,4096,device="cuda"); t=time.time()
while time.time()-t<15: a=a@a; a/=a.norm()
torch.cuda.synchronize()'
  printf '%s\n' "$work_py" >"$work/busy.py"
  u=$("$BIN/psbatch" --parsable --gres=gpu:1 -o "$work/u.out" --wrap "$PY $work/busy.py")
  su=$(wait_state "$u" 'COMPLETED|FAILED|CANCELLED|TIMEOUT|OUT_OF_MEMORY' 120)
  line=$("$BIN/psacct" -j "$u" -n -P -o State,Elapsed,GPUSeconds,GPUMemPeak,GPUUtil | head -n 1)
  peak=$(echo "$line" | cut -d'|' -f4)
  if [ "$su" = COMPLETED ] && [ -n "$peak" ]; then held usage "psacct: $line"
  else failed usage "state $su, psacct: $line"; fi
else
  skipped usage "torch is not installed"
fi

# 9. packing (PSLURM_GPU_PACKING=1): four small training jobs, whole GPUs vs slices vs MPS vs auto
if [ "${PSLURM_GPU_PACKING:-0}" != 1 ]; then
  skipped packing "PSLURM_GPU_PACKING=1 runs it (bench/gpu_packing.sh)"
elif ! torch_here; then
  skipped packing "torch is not installed"
elif PY="$PY" bash "$here/bench/gpu_packing.sh" "$BIN" "$work/packing" >"$work/packing.log" 2>&1; then
  held packing "$(grep '^makespan ' "$work/packing.log" | sed 's/^makespan //' | paste -sd ';' | sed 's/;/; /g')"
else
  failed packing "$(tail -n 2 "$work/packing.log" | tr '\n' ' ')"
fi

summary "$gpus x $model, driver $driver, $cgmode"
[ "$failed" = 0 ]
