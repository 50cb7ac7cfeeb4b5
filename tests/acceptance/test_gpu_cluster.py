"""GPUs for real, without a GPU: `pslurm up --conf` on a config with typed GPUs, fake device nodes,
ConstrainDevices=yes, Cores=, a node with fewer GPUs than configured, and a node whose GPUs come
from NVML through a fake ``pynvml`` at the library boundary (the agents import it from PYTHONPATH).

Cluster (one per module, ~3 s to start):
  c000  Gres=gpu:a100:2  gres.conf File=TMP/dev/nvidia[0-1], Cores=0 / Cores=1 (fake char 195:N)
  c001  Gres=gpu:v100:2  File=TMP/dev/nvidia[2-3]
  c002  Gres=gpu:2       only File=TMP/dev/nvidia4 -> registers DRAINED (1 < 2)
  c003  Gres=gpu:h100:2  AutoDetect=nvml -> the fake's two H100s: health and usage through NVML
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import sys
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import Cluster, cli, wait_for

FAKE_PYNVML = '''"""A fake pynvml for pslurm's tests: the real module's errors and constants, fake devices
read from the JSON file $PSLURM_FAKE_NVML on every call (so a test can change them live)."""
import importlib.util as _u
import json as _json
import os as _os
import sys as _sys
from types import SimpleNamespace as _NS

_spec = _u.spec_from_file_location("_real_pynvml", _os.environ["PSLURM_REAL_PYNVML"])
_real = _u.module_from_spec(_spec)
_sys.modules["_real_pynvml"] = _real
_spec.loader.exec_module(_real)
globals().update({k: v for k, v in vars(_real).items() if not k.startswith("__")})
MB = 1024 * 1024


def _st():
    with open(_os.environ["PSLURM_FAKE_NVML"]) as f:
        return _json.load(f)


def _gpu(h):
    g = _st()["gpus"][h]
    if g.get("lost"):
        raise NVMLError(NVML_ERROR_GPU_IS_LOST)
    return g


def nvmlInit():
    if _st().get("missing"):
        raise NVMLError(NVML_ERROR_LIBRARY_NOT_FOUND)

def nvmlShutdown(): pass
def nvmlDeviceGetCount(): return len(_st()["gpus"])
def nvmlDeviceGetHandleByIndex(i): return i
def nvmlDeviceGetHandleByUUID(u): return [g["uuid"] for g in _st()["gpus"]].index(u)
def nvmlDeviceGetName(h): return _gpu(h)["name"]
def nvmlDeviceGetUUID(h): return _gpu(h)["uuid"]
def nvmlDeviceGetMinorNumber(h): return _gpu(h)["minor"]
def nvmlDeviceGetPciInfo(h): return _NS(busId=_gpu(h)["bus"])
def nvmlDeviceGetMemoryInfo(h):
    g = _gpu(h)
    return _NS(total=80 * 1024 * MB, used=g.get("used", 0) * MB, free=0)
def nvmlDeviceGetCpuAffinity(h, n): raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
def nvmlDeviceGetNvLinkState(h, link): raise NVMLError(NVML_ERROR_NOT_SUPPORTED)
def nvmlEventSetCreate(): return "events"
def nvmlDeviceRegisterEvents(h, kinds, es): pass
def nvmlEventSetWait(es, ms): raise NVMLError(NVML_ERROR_TIMEOUT)
def nvmlEventSetFree(es): pass
def nvmlDeviceGetTotalEccErrors(h, kind, counter): return _gpu(h).get("ecc", 0)
def nvmlDeviceGetUtilizationRates(h): return _NS(gpu=_gpu(h).get("util", 0), memory=0)
def nvmlDeviceGetComputeRunningProcesses(h):
    _gpu(h)
    return [_NS(pid=p, usedGpuMemory=mb * MB) for p, mb in _st().get("procs", {}).get(str(h), [])]
'''

GPUS = [{"name": "NVIDIA H100 80GB HBM3", "uuid": f"GPU-fake-{i}", "minor": i, "bus": f"00000000:{i + 7:02X}:00.0",
         "used": 2048, "util": 60} for i in range(2)]

PROBE = (
    "import errno, json, os, sys\n"
    "res = {}\n"
    "for p in sys.argv[1:]:\n"
    "    try:\n"
    "        os.close(os.open(p, os.O_RDWR)); res[os.path.basename(p)] = 'ok'\n"
    "    except OSError as e:\n"
    "        res[os.path.basename(p)] = errno.errorcode[e.errno]\n"
    "env = {k: os.environ.get(k) for k in ('CUDA_VISIBLE_DEVICES', 'SLURM_JOB_GPUS', 'SLURMD_NODENAME')}\n"
    "print(json.dumps({'open': res, 'env': env, 'cpus': sorted(os.sched_getaffinity(0))}))\n"
)


def real_pynvml() -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        mod = pytest.importorskip("pynvml")
    return str(mod.__file__)


def write_fake_nvml(root: Path, state: dict[str, Any]) -> dict[str, str]:
    """The fake module under root/fakenvml and its state file; returns the environment to use it."""
    (root / "fakenvml").mkdir(exist_ok=True)
    (root / "fakenvml" / "pynvml.py").write_text(FAKE_PYNVML)
    set_nvml(root, state)
    path = os.pathsep.join(p for p in (str(root / "fakenvml"), os.environ.get("PYTHONPATH", "")) if p)
    return {"PYTHONPATH": path, "PSLURM_FAKE_NVML": str(root / "nvml.json"),
            "PSLURM_REAL_PYNVML": real_pynvml()}


def set_nvml(root: Path, state: dict[str, Any]) -> None:
    tmp = root / "nvml.json.tmp"
    tmp.write_text(json.dumps(state))
    tmp.rename(root / "nvml.json")  # atomic: the agent reads it on every NVML call


def make_devices(root: Path, count: int) -> Path:
    dev = root / "dev"
    dev.mkdir()
    dev.chmod(0o755)
    for minor in range(count):
        try:
            os.mknod(dev / f"nvidia{minor}", 0o666 | stat.S_IFCHR, os.makedev(195, minor))
        except PermissionError as exc:
            pytest.skip(f"cannot mknod fake GPU device nodes: {exc}")
        (dev / f"nvidia{minor}").chmod(0o666)
    return dev



class GpuCluster(Cluster):
    def __init__(self, state_dir: Path, root: Path, dev: Path, env: dict[str, str], up: str) -> None:
        super().__init__(state_dir)
        self.root, self.dev, self.up_output = root, dev, up
        self.env = {**self.env, **env}

    def node(self, name: str) -> dict[str, str]:
        text = self.run("pscontrol", "show", "node", name, check=True).stdout
        return dict(re.findall(r"(\w+)=(.*?)(?=\s+\w+=|\n|$)", text))

    def wait_job(self, job_id: str, timeout: float = 20.0) -> str:
        def final() -> str | None:
            state = self.run("psqueue", "-h", "-t", "all", "-j", job_id, "-o", "%T").stdout.strip()
            return state if state in ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT") else None

        return str(wait_for(final, timeout))


@pytest.fixture(scope="module")
def gpu_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[GpuCluster]:
    root = tmp_path_factory.mktemp("gpucluster")
    root.chmod(0o755)
    dev = make_devices(root, 5)
    env = write_fake_nvml(root, {"gpus": GPUS})
    conf = root / "conf"
    conf.mkdir()
    # SlurmdTimeout=6: agents beat every 1.5 s, so health reaches the controller quickly
    (conf / "pslurm.conf").write_text(
        "ClusterName=gputest\nSlurmdTimeout=6\nKillWait=2\n"
        "NodeName=c000 CPUs=2 RealMemory=1000 Gres=gpu:a100:2\n"
        "NodeName=c001 CPUs=2 RealMemory=1000 Gres=gpu:v100:2\n"
        "NodeName=c002 CPUs=2 RealMemory=1000 Gres=gpu:2\n"
        "NodeName=c003 CPUs=2 RealMemory=1000 Gres=gpu:h100:2\n"
        "PartitionName=gpu Nodes=ALL Default=YES\n")
    (conf / "gres.conf").write_text(
        f"NodeName=c000 Name=gpu Type=a100 File={dev}/nvidia0 Cores=0\n"
        f"NodeName=c000 Name=gpu Type=a100 File={dev}/nvidia1 Cores=1\n"
        f"NodeName=c001 Name=gpu Type=v100 File={dev}/nvidia[2-3]\n"
        f"NodeName=c002 Name=gpu File={dev}/nvidia4\n"
        "NodeName=c003 AutoDetect=nvml\n")
    (conf / "cgroup.conf").write_text("ConstrainDevices=yes\n")
    state = root / "state"
    up = cli("pslurm", "up", "--conf", str(conf / "pslurm.conf"), "--state-dir", str(state),
             env={**os.environ, **env}, timeout=120)
    try:
        assert up.returncode == 0, up.stdout + up.stderr
        yield GpuCluster(state, root, dev, env, up.stdout)
    finally:
        cli("pslurm", "down", "--state-dir", str(state), timeout=60)


def probe(cluster: GpuCluster, *args: str, paths: list[str]) -> dict[str, Any]:
    proc = cluster.run("psrun", *args, sys.executable, "-c", PROBE, *paths, cwd=cluster.root)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


# -- pslurm up --conf, discovery and drain ----------------------------------------------------------


def test_up_from_conf_copies_gres_and_cgroup_conf_and_drains_short_node(gpu_cluster: GpuCluster) -> None:
    state = gpu_cluster.state_dir
    assert (state / "gres.conf").read_text() == (gpu_cluster.root / "conf" / "gres.conf").read_text()
    assert (state / "cgroup.conf").exists()
    text = (state / "pslurm.conf").read_text()
    assert "DatabaseURL=sqlite:///" in text and "SlurmctldHost='localhost(127.0.0.1)'" in text
    assert "pslurm: warning: node c002 is drained: gres/gpu count reported lower than configured (1 < 2)" \
        in gpu_cluster.up_output
    node = gpu_cluster.node("c002")
    assert node["State"] == "IDLE+DRAIN"  # scontrol 22.05: the base state, then +DRAIN
    assert re.fullmatch(r"gres/gpu count reported lower than configured \(1 < 2\) \[root@[0-9T:-]+\]", node["Reason"])
    out = gpu_cluster.run("psinfo", "-N", "-h", "-o", "%N %G %t", check=True).stdout.split("\n")
    assert out[:4] == ["c000 gpu:a100:2 idle", "c001 gpu:v100:2 idle", "c002 gpu:2 drain", "c003 gpu:h100:2 idle"]


def test_nvml_node_reports_detected_gpus(gpu_cluster: GpuCluster) -> None:
    node = gpu_cluster.node("c003")
    assert node["Gres"] == "gpu:h100:2" and node["State"] == "IDLE"
    shown = json.loads(gpu_cluster.run("pscontrol", "--json=pslurm", "show", "node", "c003", check=True).stdout)
    gpus = [(g["index"], g["type"], g["file"]) for g in shown["nodes"][0]["gpus"]]  # each GPU as NVML found it
    assert gpus == [(0, "h100", "/dev/nvidia0"), (1, "h100", "/dev/nvidia1")], gpus


def test_isolation_is_shown(gpu_cluster: GpuCluster) -> None:
    isolation = gpu_cluster.node("c000")["DeviceIsolation"]
    if os.geteuid() != 0:
        assert isolation == f"none: device cgroups need root (the agent runs as uid {os.geteuid()})"
    else:  # the mechanism, or why there is none
        assert re.fullmatch(r"devices \((cgroup v2 bpf|cgroup v1|cgroup v2 bpf \+ cgroup v1)\)|none: .+", isolation)


# -- typed requests ---------------------------------------------------------------------------------


def test_typed_requests_land_on_their_type_and_unknown_types_are_refused(gpu_cluster: GpuCluster) -> None:
    a100 = probe(gpu_cluster, "--gres=gpu:a100:1", paths=[])
    v100 = probe(gpu_cluster, "--gres=gpu:v100:2", paths=[])
    assert a100["env"]["SLURMD_NODENAME"] == "c000" and v100["env"]["SLURMD_NODENAME"] == "c001"
    refused = gpu_cluster.run("psbatch", "--gres=gpu:k80:1", "--wrap", "true")
    assert refused.returncode == 1
    assert refused.stderr.strip() == ("psbatch: error: Batch job submission failed: "
                                      "Requested node configuration is not available")
    too_many = gpu_cluster.run("psrun", "--gres=gpu:a100:3", "true")
    assert too_many.returncode == 1 and "Requested node configuration is not available" in too_many.stderr


# -- isolation and affinity -------------------------------------------------------------------------


def test_job_opens_only_its_own_gpu_and_runs_on_its_cores(gpu_cluster: GpuCluster) -> None:
    isolation = gpu_cluster.node("c000")["DeviceIsolation"]
    if isolation.startswith("none"):
        pytest.skip(f"no device isolation here: {isolation}")
    if not {0, 1} <= os.sched_getaffinity(0):
        pytest.skip("needs CPUs 0 and 1")
    dev = gpu_cluster.dev
    # hold GPU 0 of c000 so the probe gets node GPU 1: SLURM_JOB_GPUS=1, CUDA_VISIBLE_DEVICES=0
    hold = gpu_cluster.run("psbatch", "--parsable", "--gres=gpu:a100:1", "-o", "/dev/null", "--wrap",
                           "sleep 30", cwd=gpu_cluster.root)
    assert hold.returncode == 0, hold.stderr
    held = hold.stdout.strip()
    try:
        wait_for(lambda: gpu_cluster.run("psqueue", "-h", "-j", held, "-o", "%T").stdout.strip() == "RUNNING")
        res = probe(gpu_cluster, "--gres=gpu:a100:1", paths=[f"{dev}/nvidia0", f"{dev}/nvidia1",
                                                             f"{dev}/nvidia2", "/dev/null"])
    finally:
        gpu_cluster.run("pscancel", held)
    assert res["open"] == {"nvidia0": errno.errorcode[errno.EPERM], "nvidia1": errno.errorcode[errno.ENXIO],
                           "nvidia2": errno.errorcode[errno.EPERM], "null": "ok"}
    assert res["env"] == {"CUDA_VISIBLE_DEVICES": "0", "SLURM_JOB_GPUS": "1", "SLURMD_NODENAME": "c000"}
    assert res["cpus"] == [1]  # gres.conf Cores=1 for nvidia1
    both = probe(gpu_cluster, "--gres=gpu:v100:2", paths=[f"{dev}/nvidia2", f"{dev}/nvidia3",
                                                         f"{dev}/nvidia0"])
    assert both["open"] == {"nvidia2": "ENXIO", "nvidia3": "ENXIO", "nvidia0": "EPERM"}
    assert both["env"]["CUDA_VISIBLE_DEVICES"] == "0,1" and both["env"]["SLURM_JOB_GPUS"] == "0,1"
    def leftovers() -> list[Path]:  # job cgroups, in any hierarchy
        return [*Path("/sys/fs/cgroup").glob("pslurm_gputest/*/job_*"),
                *Path("/sys/fs/cgroup").glob("*/pslurm_gputest/*/job_*")]

    assert leftovers() == [] or wait_for(lambda: not leftovers(), 5)


# -- health -----------------------------------------------------------------------------------------


def test_nvml_health_drains_and_resume_brings_node_back(gpu_cluster: GpuCluster) -> None:
    broken = [dict(GPUS[0]), {**GPUS[1], "ecc": 2}]
    set_nvml(gpu_cluster.root, {"gpus": broken})
    try:
        node = wait_for(lambda: (n := gpu_cluster.node("c003"))["State"] == "IDLE+DRAIN" and n, 10)
        assert re.fullmatch(r"gpu 1: 2 uncorrectable ECC error\(s\) \[root@[0-9T:-]+\]", node["Reason"]), node
        # still broken: a RESUME does not stick, the next heartbeat drains again (as a health check would)
        gpu_cluster.run("pscontrol", "update", "NodeName=c003", "State=RESUME", check=True)
        wait_for(lambda: gpu_cluster.node("c003")["State"] == "IDLE+DRAIN", 10)
    finally:
        set_nvml(gpu_cluster.root, {"gpus": GPUS})
    time.sleep(2)  # a heartbeat with the healthy GPUs
    gpu_cluster.run("pscontrol", "update", "NodeName=c003", "State=RESUME", check=True)
    time.sleep(3.5)  # two more heartbeats: the resume holds
    node = gpu_cluster.node("c003")
    assert node["State"] == "IDLE" and "Reason" not in node


# -- usage accounting and psacct --------------------------------------------------------------------


def test_usage_recorded_with_nvml_and_without(gpu_cluster: GpuCluster) -> None:
    nvml_state = gpu_cluster.root / "nvml.json"
    set_nvml(gpu_cluster.root, {"gpus": [{**g, "used": 0} for g in GPUS]})
    # the job fills its GPU (1600 MB used) and names its own shell as a process on it (1500 MB), next
    # to a stranger (pid 1): the job's own processes are what its peak counts
    script = gpu_cluster.root / "usage.sh"
    script.write_text(
        "#!/bin/sh\n"
        f"{sys.executable} - $$ <<'EOF'\n"
        "import json, os, sys\n"
        f"p = {str(nvml_state)!r}\n"
        "s = json.load(open(p))\n"
        "s['procs'] = {'0': [[int(sys.argv[1]), 1500], [1, 999]], '1': [[int(sys.argv[1]), 1500], [1, 999]]}\n"
        "for g in s['gpus']: g['used'] = 1600\n"
        "open(p + '.job', 'w').write(json.dumps(s)); os.rename(p + '.job', p)\n"
        "EOF\n"
        "sleep 3\n")
    nvml_job = gpu_cluster.run("psbatch", "--parsable", "--gres=gpu:h100:1", "-o", "/dev/null", str(script),
                               cwd=gpu_cluster.root)
    static_job = gpu_cluster.run("psbatch", "--parsable", "--gres=gpu:v100:2", "-o", "/dev/null", "--wrap",
                                 "sleep 2", cwd=gpu_cluster.root)
    cpu_job = gpu_cluster.run("psbatch", "--parsable", "-o", "/dev/null", "--wrap", "true",
                              cwd=gpu_cluster.root)
    ids = [p.stdout.strip() for p in (nvml_job, static_job, cpu_job)]
    try:
        for job_id in ids:
            assert gpu_cluster.wait_job(job_id) == "COMPLETED"
    finally:
        set_nvml(gpu_cluster.root, {"gpus": GPUS})
    out = gpu_cluster.run("psacct", "-j", ",".join(ids), "--parsable2", "-o",
                          "JobID,State,AllocTRES,GPUSeconds,GPUMemPeak,GPUUtil,NodeList", check=True).stdout
    lines = out.splitlines()
    assert lines[0] == "JobID|State|AllocTRES|GPUSeconds|GPUMemPeak|GPUUtil|NodeList"
    rows = {line.split("|")[0]: line.split("|") for line in lines[1:]}
    nvml_row, static_row, cpu_row = rows[ids[0]], rows[ids[1]], rows[ids[2]]
    assert nvml_row[1:3] == ["COMPLETED", "billing=1,cpu=1,gres/gpu=1,gres/gpu:h100=1,node=1"]
    assert 2 <= int(nvml_row[3]) <= 6 and nvml_row[4:] == ["1500M", "60.0%", "c003"]
    assert static_row[2] == "billing=1,cpu=1,gres/gpu=2,gres/gpu:v100=2,node=1"
    assert 3 <= int(static_row[3]) <= 6 and static_row[4:6] == ["", ""]  # no NVML: not measured
    assert cpu_row[2:6] == ["billing=1,cpu=1,node=1", "", "", ""]
    # the GPU measures are pslurm's own: in its JSON (--json=pslurm), not in Slurm's shape (--json)
    data = json.loads(gpu_cluster.run("psacct", "--json=pslurm", "-j", ids[0], check=True).stdout)["jobs"][0]
    assert data["peak_gpu_memory_mb"] == 1500 and data["mean_gpu_util"] == pytest.approx(60.0)
    static = json.loads(gpu_cluster.run("psacct", "--json=pslurm", "-j", ids[1], check=True).stdout)["jobs"][0]
    assert static["peak_gpu_memory_mb"] is None and static["gpu_seconds"] >= 3


def test_psacct_defaults_and_formats(gpu_cluster: GpuCluster) -> None:
    job = gpu_cluster.run("psbatch", "--parsable", "-J", "acct", "-o", "/dev/null", "--wrap", "exit 3",
                          cwd=gpu_cluster.root).stdout.strip()
    assert gpu_cluster.wait_job(job) == "FAILED"
    lines = gpu_cluster.run("psacct", check=True).stdout.splitlines()
    assert lines[0].split() == ["JobID", "JobName", "Partition", "Account", "AllocCPUS", "State", "ExitCode"]
    assert set(lines[1]) == {"-", " "}
    row = next(line for line in lines if line.startswith(f"{job} "))
    assert row.split() == [job, "acct", "gpu", "root", "1", "FAILED", "3:0"]  # root's job charges root's association
    parsable = gpu_cluster.run("psacct", "-j", job, "-n", "-p", "-o", "JobID,JobName,State", check=True)
    assert parsable.stdout == f"{job}|acct|FAILED|\n{job}.batch|batch|FAILED|\n"  # its batch step, as sacct
    assert gpu_cluster.run("psacct", "-S", "now+1hours", "-n", "-P", "-o", "JobID", check=True).stdout == ""
    bad = gpu_cluster.run("psacct", "-o", "JobID,Nope")
    assert bad.returncode == 1 and bad.stderr.strip() == 'psacct: error: Invalid field requested: "Nope"'


# -- psd on its own ---------------------------------------------------------------------------------


def test_psd_print_gres_static_and_nvml(tmp_path: Path) -> None:
    env = {**os.environ, **write_fake_nvml(tmp_path, {"gpus": GPUS})}
    (tmp_path / "pslurm.conf").write_text("NodeName=n1 Gres=gpu:a100:2\nNodeName=n2 Gres=gpu:2\n"
                                          "PartitionName=p Nodes=ALL\n")
    (tmp_path / "gres.conf").write_text("NodeName=n1 Name=gpu Type=a100 File=/dev/nvidia[0-1] Cores=0-3\n"
                                        "NodeName=n2 AutoDetect=nvml\n")
    static = cli("psd", "-f", str(tmp_path / "pslurm.conf"), "-N", "n1", "--print-gres", env=env)
    assert static.returncode == 0, static.stderr
    assert static.stdout == ("Name=gpu Type=a100 File=/dev/nvidia0 Cores=0-3\n"
                             "Name=gpu Type=a100 File=/dev/nvidia1 Cores=0-3\n")
    nvml = cli("psd", "-f", str(tmp_path / "pslurm.conf"), "-N", "n2", "-G", env=env)
    assert nvml.returncode == 0, nvml.stderr
    assert nvml.stdout == ("Name=gpu Type=h100 File=/dev/nvidia0 UniqueId=GPU-fake-0\n"
                           "Name=gpu Type=h100 File=/dev/nvidia1 UniqueId=GPU-fake-1\n")


def test_psd_without_nvml_library_says_so_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, **write_fake_nvml(tmp_path, {"gpus": [], "missing": True})}
    (tmp_path / "pslurm.conf").write_text("NodeName=n1 Gres=gpu:2\nPartitionName=p Nodes=ALL\n")
    (tmp_path / "gres.conf").write_text("AutoDetect=nvml\n")
    for args in ([], ["-G"]):
        proc = cli("psd", "-f", str(tmp_path / "pslurm.conf"), "-N", "n1", *args, env=env, timeout=20)
        assert proc.returncode == 1
        assert proc.stdout == ""
        assert proc.stderr == ("psd: error: AutoDetect=nvml but the NVML library could not be loaded: "
                               "NVML Shared Library Not Found\n")


def test_up_fails_in_one_line_when_an_agent_cannot_find_nvml(tmp_path: Path) -> None:
    env = {**os.environ, **write_fake_nvml(tmp_path, {"gpus": [], "missing": True})}
    conf = tmp_path / "conf"
    conf.mkdir()
    (conf / "pslurm.conf").write_text("NodeName=n1 Gres=gpu:2\nPartitionName=p Nodes=ALL\n")
    (conf / "gres.conf").write_text("AutoDetect=nvml\n")
    try:
        up = cli("pslurm", "up", "--conf", str(conf / "pslurm.conf"), "--state-dir", str(tmp_path / "s"),
                 env=env, timeout=60)
    finally:
        cli("pslurm", "down", "--state-dir", str(tmp_path / "s"))
    assert up.returncode == 1
    assert "psd-n1 exited during start-up: psd: error: AutoDetect=nvml but the NVML library could not be " \
           "loaded" in up.stderr
