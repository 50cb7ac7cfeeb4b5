"""The node's checks, with the agent's own code: its GPU inventory (gres.conf, NVML), its cgroup
layout (cgroup.conf and the mounted hierarchies), a probe job in a cgroup the agent's way.

The isolation probe is a real job cgroup (this node's, under a cluster name of its own so it meets no
job) given the first GPU: a child process in it opens every GPU device file. Its own must open (a
device node without a driver behind it answers ENXIO: allowed, the driver is what is missing), every
other must be refused (EPERM); a second probe given no GPU must be refused the first. The CUDA probe
(``--gpu``) runs a small program in such a job, one per GPU: through the CUDA driver API (ctypes;
``torch.cuda`` too where torch is installed) it must see exactly one GPU, the one it was given.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pslurm.core.config import CgroupConfig, ClusterConfig, ConfigError, GresConfLine, NodeConfig
from pslurm.doctor.report import Check, fail, ok, skip, warn
from pslurm.nodeagent.cgroupnode import Mounts, NodeCgroups, plan_layout
from pslurm.nodeagent.cgroups import ChildSetup, JobCgroup, read_file
from pslurm.nodeagent.gpus import (
    GpuDevice,
    GpuDiscoveryError,
    check_inventory,
    discover_nvml,
    inventory_from_gres_conf,
)
from pslurm.nodeagent.mps import MPS_CONTROL

PROBE_TIMEOUT = 60.0  # seconds a probe program may take (a CUDA context on a busy GPU takes a few)
LIBCUDA_ENV = "PSLURM_LIBCUDA"  # the CUDA driver library the probe loads (default libcuda.so.1)

# Runs in the probe job: open each device file given, print how it went.
OPEN_PROBE = """import errno, os, sys
for path in sys.argv[1:]:
    try:
        os.close(os.open(path, os.O_RDWR))
        print(path, "open")
    except OSError as exc:
        print(path, errno.errorcode.get(exc.errno, str(exc.errno)))
"""

# Runs in the probe job: the GPUs the CUDA driver API shows it (and torch, where installed), as JSON.
CUDA_PROBE = """import ctypes, json, os, sys
out = {}
try:
    cuda = ctypes.CDLL(os.environ.get("PSLURM_LIBCUDA") or "libcuda.so.1")
    count = ctypes.c_int(0)
    rc = cuda.cuInit(0)
    if rc == 100:  # CUDA_ERROR_NO_DEVICE
        out["count"], out["bus_ids"] = 0, []
    elif rc != 0:
        out["error"] = f"cuInit failed with CUDA error {rc}"
    elif cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        out["error"] = "cuDeviceGetCount failed"
    else:
        out["count"], out["bus_ids"] = count.value, []
        for i in range(count.value):
            dev, buf = ctypes.c_int(0), ctypes.create_string_buffer(64)
            cuda.cuDeviceGet(ctypes.byref(dev), i)
            cuda.cuDeviceGetPCIBusId(buf, 64, dev)
            out["bus_ids"].append(buf.value.decode())
except OSError as exc:
    out["error"] = f"the CUDA driver library does not load: {exc}"
try:
    import torch
    out["torch"] = torch.cuda.device_count()
except ImportError:
    pass
except Exception as exc:
    out["torch_error"] = str(exc).splitlines()[0]
print(json.dumps(out))
"""


@dataclass(frozen=True)
class NodeView:
    """The node as its agent would see it."""

    node: NodeConfig
    devices: list[GpuDevice]
    autodetect: bool  # AutoDetect=nvml
    inventory_error: str | None  # why the agent would not start (gres.conf, NVML)


def node_view(config: ClusterConfig, node: NodeConfig, gres_lines: list[GresConfLine]) -> NodeView:
    try:
        devices, autodetect = inventory_from_gres_conf(gres_lines, node.name)
    except (GpuDiscoveryError, ConfigError) as exc:
        return NodeView(node, [], any((ln.autodetect or "").lower() == "nvml" for ln in gres_lines), str(exc))
    return NodeView(node, devices, autodetect, None)


def check_gres(view: NodeView) -> Check:
    """The GPUs the agent would find against pslurm.conf's Gres=."""
    if view.inventory_error is not None:
        return fail("gres", f"the agent would not start: {view.inventory_error}")
    want = view.node.gpus()
    drained = check_inventory(view.devices, want)
    if drained:
        return fail("gres", f"the node would register drained: {drained}: fix gres.conf or Gres= in pslurm.conf")
    if not view.devices:
        return skip("gres", "no GPUs configured for this node")
    source = "NVML" if view.autodetect else "gres.conf"
    files = ", ".join(d.file for d in view.devices if d.file) or "no device files (simulated GPUs)"
    return ok("gres", f"{len(view.devices)} GPU(s) from {source} for {want} in Gres=: {files}")


def check_cgroup(conf: CgroupConfig, mounts: Mounts | None = None) -> Check:
    """The cgroup mode, its controllers, and whether cgroup.conf's limits can be applied here."""
    if conf.plugin == "disabled":
        return fail("cgroup", "CgroupPlugin=disabled: jobs get no cgroup (no kill of a job's every process, no "
                              "device, memory or CPU limits): set CgroupPlugin=autodetect in cgroup.conf")
    mounts = mounts or Mounts.read()
    layout = plan_layout(conf, mounts)
    if layout.version == 2:
        kind = f"cgroup v2 at {layout.v2}"
        controllers = (read_file(os.path.join(layout.v2, "cgroup.controllers")) or "").split() if layout.v2 else []
    else:
        kind = "cgroup v1" + (f" with the v2 hierarchy at {layout.v2} (hybrid)" if layout.v2 else "")
        controllers = sorted(mounts.v1)
    if not layout.roots:
        return fail("cgroup", f"no usable cgroup hierarchy ({kind}; CgroupMountpoint={conf.mountpoint}): jobs "
                              "would get no cgroup: fix CgroupMountpoint=/CgroupPlugin= in cgroup.conf")
    if layout.problems:
        return fail("cgroup", f"{kind}: {'; '.join(layout.problems)}")
    return ok("cgroup", f"{kind}; controllers: {' '.join(controllers) or 'none'}")


def check_isolation(view: NodeView, conf: CgroupConfig) -> Check:
    """A probe job given the first GPU opens it and is refused the others; one given none is refused it."""
    files = _device_files(view)
    if not files:
        return skip("isolation", "no GPU device files on this node: nothing to isolate")
    if os.geteuid() != 0:
        return skip("isolation", "not root: a probe job's cgroup needs root (run pslurm doctor as root)")
    nodecg = NodeCgroups.setup(conf, f"doctor-{os.getpid()}", view.node.name)
    if nodecg is None:
        return fail("isolation", "the agent could make no job cgroup here (see the cgroup check): jobs are not "
                                 "isolated")
    (own, minor), others = files[0], [path for path, _ in files[1:]]
    try:
        given = _opened(nodecg, 1, [minor], [own, *others])
        none = _opened(nodecg, 2, [], [own])
    except (OSError, subprocess.SubprocessError) as exc:
        return fail("isolation", f"the probe job could not run: {exc}")
    finally:
        nodecg.remove_parents()
    denied = ("EPERM", "EACCES")
    if given.get(own) in denied:
        return fail("isolation", f"a job given {own} is refused it ({given[own]}): the device filter denies the "
                                 "job's own GPU")
    leaked = [path for path in others if given.get(path) not in denied]
    if leaked or none.get(own) not in denied:
        fix = "set ConstrainDevices=yes in cgroup.conf" if not conf.constrain_devices else \
            f"the node's isolation is {nodecg.isolation}"
        opened = ", ".join(leaked) if leaked else f"{own} (given none)"
        return fail("isolation", f"a job given {own} opened another GPU: {opened}: {fix}")
    return ok("isolation", f"a job given {own} opens it ({given.get(own)}) and is refused "
                           f"{', '.join(others) or 'nothing else'}; one given none is refused it ({nodecg.isolation})")


def _device_files(view: NodeView) -> list[tuple[str, int]]:
    """(device file, minor) of each of the node's GPUs that has one."""
    return [(d.file, d.minor) for d in view.devices if d.file and d.minor is not None]


def _opened(nodecg: NodeCgroups, job_id: int, minors: Iterable[int], paths: list[str]) -> dict[str, str]:
    """Each path's outcome (open, or the errno's name) for a child in a probe job given ``minors``."""
    out = _in_probe_job(nodecg, job_id, minors, [sys.executable, "-c", OPEN_PROBE, *paths], {})
    pairs = (line.rsplit(" ", 1) for line in out.splitlines() if " " in line)
    return {path: outcome for path, outcome in pairs}


def _in_probe_job(nodecg: NodeCgroups, job_id: int, minors: Iterable[int], argv: list[str],
                  env: dict[str, str]) -> str:
    """``argv``'s stdout, run in a fresh job cgroup given the GPUs ``minors``; the cgroup goes after."""
    job: JobCgroup = nodecg.create(job_id, gpu_minors=minors)
    try:
        with ChildSetup(job) as setup:
            done = subprocess.run(argv, preexec_fn=setup, capture_output=True, text=True, timeout=PROBE_TIMEOUT,
                                  env=env or None, check=False)
        return done.stdout
    finally:
        job.kill_all(timeout=2.0)
        job.remove(timeout=2.0)


def check_nvml(view: NodeView) -> tuple[Check, list[GpuDevice]]:
    """NVML and each GPU's health (Xid, ECC, fallen off the bus); the GPUs it sees."""
    try:
        found = discover_nvml()
    except GpuDiscoveryError as exc:
        if view.autodetect:
            return fail("nvml", f"{exc}: install the NVIDIA driver (libnvidia-ml) and nvidia-ml-py"), []
        why = str(exc).removeprefix("AutoDetect=nvml but ")
        return skip("nvml", f"no GPU on this machine that NVML sees ({why}): GPU checks skipped"), []
    if not found:
        return skip("nvml", "NVML sees no GPU on this machine: GPU checks skipped"), []
    from pslurm.nodeagent.gpumon import GpuMonitor

    monitor = GpuMonitor(found)
    try:
        sick = monitor.health()
    except GpuDiscoveryError as exc:
        return fail("nvml", str(exc)), found
    finally:
        monitor.close()
    gpus = ", ".join(f"{d.index} {d.type} {d.pci_bus_id}" for d in found)
    if sick:
        return fail("nvml", f"{sick}: drain the node and look at the GPU (nvidia-smi -q)"), found
    return ok("nvml", f"{len(found)} GPU(s), healthy: {gpus}"), found


def check_mps(view: NodeView) -> Check:
    if not any(d.mps for d in view.devices):
        return skip("mps", "no Name=mps in gres.conf for this node")
    binary = shutil.which(MPS_CONTROL)
    if binary is None:
        return fail("mps", f"gres.conf shares GPUs by Name=mps but {MPS_CONTROL} is not on PATH: install the "
                           "NVIDIA driver's MPS tools")
    return ok("mps", f"{binary}")


def check_cuda(view: NodeView, nvml_gpus: list[GpuDevice], conf: CgroupConfig) -> list[Check]:
    """``--gpu``: in a probe job per GPU, a CUDA program sees exactly that GPU."""
    if not nvml_gpus and not os.environ.get(LIBCUDA_ENV):
        return [skip("cuda", "no GPU on this machine (NVML sees none): the CUDA probe needs one")]
    if os.geteuid() != 0:
        return [skip("cuda", "not root: a probe job's cgroup needs root (run pslurm doctor --gpu as root)")]
    files = _device_files(view)
    if not files:
        return [skip("cuda", "no GPU device files on this node: nothing to probe")]
    nodecg = NodeCgroups.setup(conf, f"doctor-{os.getpid()}", view.node.name)
    if nodecg is None:
        return [fail("cuda", "the agent could make no job cgroup here (see the cgroup check)")]
    by_minor = {d.minor: d for d in nvml_gpus}
    env = {k: v for k, v in os.environ.items() if k != "CUDA_VISIBLE_DEVICES"}  # the cgroup alone decides
    checks = []
    try:
        for i, (path, minor) in enumerate(files):
            try:
                out = _in_probe_job(nodecg, 10 + i, [minor], [sys.executable, "-c", CUDA_PROBE], env)
                seen = json.loads(out.strip().splitlines()[-1])
            except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
                checks.append(fail("cuda", f"GPU {i} ({path}): the probe program failed: {exc}"))
                continue
            checks.append(_judge(f"GPU {i} ({path})", by_minor.get(minor), seen, conf))
    finally:
        nodecg.remove_parents()
    return checks


def _judge(name: str, nvml: GpuDevice | None, seen: dict[str, Any], conf: CgroupConfig) -> Check:
    """The CUDA probe's report on the GPU ``name`` (``nvml``: that GPU as NVML sees it)."""
    from pslurm.nodeagent.gpus import normal_bus_id

    if "error" in seen:
        return fail("cuda", f"{name}: {seen['error']}: install the NVIDIA driver")
    count, bus_ids = seen.get("count"), [normal_bus_id(str(b)) for b in seen.get("bus_ids") or []]
    if count != 1:
        fix = "set ConstrainDevices=yes in cgroup.conf" if not conf.constrain_devices else "see the isolation check"
        return fail("cuda", f"{name}: a CUDA program in a job given it sees {count} GPUs: {fix}")
    if nvml is not None and nvml.pci_bus_id and bus_ids != [nvml.pci_bus_id]:
        return fail("cuda", f"{name}: a CUDA program in a job given it sees {bus_ids[0]}, not {nvml.pci_bus_id}")
    if "torch" in seen and seen["torch"] != 1:
        return fail("cuda", f"{name}: torch in a job given it sees {seen['torch']} GPUs")
    torch = f", torch sees {seen['torch']}" if "torch" in seen else ""
    if "torch_error" in seen:
        return warn("cuda", f"{name}: the CUDA driver API sees exactly it; torch failed: {seen['torch_error']}")
    return ok("cuda", f"{name}: a CUDA program in a job given it sees exactly it ({bus_ids[0]}){torch}")


def unknown_node(name: str, path: str) -> Check:
    return skip("node", f"this host ({name}) is no NodeName= in {path}: node checks skipped (-N NAME to check one)")
