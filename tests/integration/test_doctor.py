"""pslurm doctor finds what it claims to: each check broken on purpose on a real host (root, real cgroups,
device nodes made with mknod, a real controller or a server answering its ping) and seen failing with
its fix, then seen passing. Without a GPU the NVML check says so; the CUDA probe runs against a stand-in
for the CUDA driver, built here, that shows a process the GPUs its device cgroup lets it open, as the
driver does."""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import tempfile
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pslurm.auth.credential import create_key
from pslurm.cluster.local import free_ports
from pslurm.core.config import CgroupConfig
from pslurm.doctor.__main__ import run
from pslurm.doctor.node import check_cgroup
from pslurm.doctor.report import Check
from pslurm.nodeagent.cgroupnode import Mounts
from pslurm.nodeagent.gpus import GpuDiscoveryError, discover_nvml
from tests.conftest import cli

HOST = socket.gethostname().split(".")[0]
NVIDIA_MAJOR = 195

FAKE_LIBCUDA = r"""
/* The CUDA driver API where there is no driver: the GPUs are the device files named in
   $FAKE_CUDA_DEVICES (colon-separated) that this process may open; a file its device cgroup refuses
   (EPERM) is no GPU to it, as the real driver shows a process only the GPUs it may open. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static int seen[64], count = 0;
int cuInit(unsigned int flags) {
    char list[4096], *path, *rest;
    int index = 0;
    (void)flags;
    snprintf(list, sizeof list, "%s", getenv("FAKE_CUDA_DEVICES") ? getenv("FAKE_CUDA_DEVICES") : "");
    for (path = strtok_r(list, ":", &rest); path && count < 64; path = strtok_r(NULL, ":", &rest), index++) {
        int fd = open(path, O_RDWR);
        if (fd >= 0) close(fd);
        if (fd >= 0 || errno == ENXIO) seen[count++] = index;
    }
    return count ? 0 : 100; /* CUDA_ERROR_NO_DEVICE */
}
int cuDeviceGetCount(int *n) { *n = count; return 0; }
int cuDeviceGet(int *device, int ordinal) { *device = ordinal; return 0; }
int cuDeviceGetPCIBusId(char *bus_id, int len, int device) {
    snprintf(bus_id, len, "0000:%02x:00.0", seen[device] + 1);
    return 0;
}
"""


def nvml_loads() -> bool:
    try:
        return bool(discover_nvml())
    except GpuDiscoveryError:
        return False


class Node:
    """pslurm.conf, gres.conf, cgroup.conf and a key for node c000 with two GPUs: device nodes made with
    mknod (c 195 N: opening one answers ENXIO, no driver behind it) in ``root``."""

    def __init__(self, root: Path, rest_port: int) -> None:
        self.root = root
        self.devices = [root / f"nvidia{i}" for i in (0, 1)]
        for i, path in enumerate(self.devices):
            os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(NVIDIA_MAJOR, i))
        self.conf = root / "pslurm.conf"
        self.write(rest_port=rest_port)
        self.gres(f"NodeName=c000 Name=gpu File={root}/nvidia[0-1]\n")
        self.cgroup("ConstrainDevices=yes\n")
        self.key = root / "pslurm.key"
        create_key(str(self.key))

    def write(self, rest_port: int, extra: str = "", gres: str = "gpu:2") -> None:
        self.conf.write_text(f"ClusterName=doctor{os.getpid()}\nSlurmctldHost={HOST}(127.0.0.1)\nRestPort={rest_port}\n"
                             f"StateSaveLocation={self.root}/ctld\nSlurmdSpoolDir={self.root}/spool\n{extra}"
                             f"NodeName=c000 NodeAddr=127.0.0.1 Port={free_ports(1)[0]} CPUs=2 RealMemory=1000 "
                             f"Gres={gres}\nPartitionName=p Nodes=c000 Default=YES\n")
        self.conf.chmod(0o644)

    def gres(self, text: str) -> None:
        (self.root / "gres.conf").write_text(text)

    def cgroup(self, text: str) -> None:
        (self.root / "cgroup.conf").write_text(text)

    def check(self, name: str, gpu: bool = False) -> Check:
        found = [c for c in run(str(self.conf), "c000", gpu) if c.name == name]
        assert len(found) == 1, found
        return found[0]


class Pinged(BaseHTTPRequestHandler):
    """A controller's ping, as the server's ``reply`` says (its database state, its clock's offset)."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        server: Any = self.server
        body = json.dumps({"name": HOST, "index": 0, "role": "primary", "mode": "active", "active": HOST,
                           "database": server.database, "time": time.time() + server.offset, "errors": []}).encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def pinged() -> Iterator[Any]:
    server: Any = ThreadingHTTPServer(("127.0.0.1", 0), Pinged)
    server.database, server.offset = "ok", 0.0
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def node(pinged: Any) -> Iterator[Node]:
    """The node's files in a directory every user reaches (as /etc/pslurm is): pytest's own are 0700, which
    would keep a file's loose mode harmless."""
    if os.geteuid() != 0:
        pytest.fail("the doctor's probes make job cgroups and device nodes: run the tests as root (CI is)")
    root = Path(tempfile.mkdtemp(prefix="doctor-", dir="/tmp"))
    root.chmod(0o755)
    try:
        yield Node(root, pinged.server_address[1])
    finally:
        shutil.rmtree(root)


def test_the_key_and_the_configuration_files(node: Node) -> None:
    assert node.check("key").status == "ok"
    node.key.chmod(0o644)
    broken = node.check("key")
    assert broken.status == "FAIL" and broken.message.endswith(f"(mode 0644): chmod 600 {node.key}"), broken
    node.key.unlink()
    assert node.check("key").message.startswith(f"no cluster key at {node.key}")
    assert node.check("config").status == "ok"
    node.conf.chmod(0o666)
    assert node.check("config").message == f"{node.conf} can be written by other users (mode 0666): " \
                                           f"chmod 644 {node.conf}"
    node.conf.chmod(0o644)
    url = node.root / "database.url"
    url.write_text("postgresql+psycopg://u:p@db/pslurm\n")
    url.chmod(0o644)
    node.write(int(node.conf.read_text().split("RestPort=")[1].split()[0]), f"DatabaseURLFile={url}\n")
    assert node.check("database-file").status == "FAIL"  # this host is the controller's: its file must be 0600
    url.chmod(0o600)
    assert node.check("database-file").status == "ok"


def test_the_gres_the_agent_would_find(node: Node) -> None:
    assert node.check("gres").status == "ok"
    node.write(int(node.conf.read_text().split("RestPort=")[1].split()[0]), gres="gpu:3")
    assert node.check("gres").message == "the node would register drained: gres/gpu count reported lower than " \
                                         "configured (2 < 3): fix gres.conf or Gres= in pslurm.conf"


def test_the_cgroup_hierarchy(node: Node) -> None:
    assert node.check("cgroup").status == "ok"
    node.cgroup("CgroupPlugin=disabled\n")
    assert node.check("cgroup").message.startswith("CgroupPlugin=disabled: jobs get no cgroup")
    # hosts other than this one, as their mount tables and cgroup.controllers files say
    conf = CgroupConfig(constrain_devices=True)
    assert check_cgroup(conf, Mounts()).message.startswith("no usable cgroup hierarchy (cgroup v1; ")
    v2 = node.root / "v2"
    v2.mkdir()
    (v2 / "cgroup.controllers").write_text("cpu io\n")
    ram = check_cgroup(CgroupConfig(constrain_ram_space=True, mountpoint=str(v2)), Mounts(v2=(str(v2),)))
    assert ram.status == "FAIL" and ram.message.endswith(f"ConstrainRAMSpace=yes but the cgroup v2 hierarchy at {v2} "
                                                         "has no memory controller"), ram


def test_a_probe_job_is_refused_every_gpu_but_its_own(node: Node) -> None:
    held = node.check("isolation")
    assert held.status == "ok", held
    assert held.message.startswith(f"a job given {node.devices[0]} opens it (ENXIO) and is refused {node.devices[1]}")
    node.cgroup("ConstrainDevices=no\n")
    broken = node.check("isolation")
    assert broken.message == f"a job given {node.devices[0]} opened another GPU: {node.devices[1]}: set " \
                             "ConstrainDevices=yes in cgroup.conf", broken
    leftovers = list(Path("/sys/fs/cgroup").rglob(f"pslurm_doctor-{os.getpid()}"))
    assert leftovers == []  # the probe jobs' cgroups are gone


def test_nvml_and_mps(node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if nvml_loads():
        assert node.check("nvml").status in ("ok", "FAIL")  # a GPU host: health as NVML says
    else:
        assert node.check("nvml").message.startswith("no GPU on this machine that NVML sees")
        node.gres("AutoDetect=nvml\n")  # asked for, not there: the agent would not start
        broken = node.check("nvml")
        assert broken.status == "FAIL" and "NVML" in broken.message, broken
    node.gres(f"NodeName=c000 Name=gpu File={node.root}/nvidia[0-1]\nNodeName=c000 Name=mps Count=200\n")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    assert node.check("mps").message.startswith("gres.conf shares GPUs by Name=mps but nvidia-cuda-mps-control is "
                                                "not on PATH")
    (tmp_path / "bin").mkdir()
    tool = tmp_path / "bin" / "nvidia-cuda-mps-control"
    tool.write_text("#!/bin/sh\n")
    tool.chmod(0o755)
    assert node.check("mps").status == "ok"


def test_the_controller_its_database_and_the_clock(node: Node, pinged: Any) -> None:
    checks = {c.name: c for c in run(str(node.conf), "c000")}
    assert [checks[n].status for n in ("controller", "database", "clock")] == ["ok", "ok", "ok"], checks
    pinged.database, pinged.offset = "unreachable: OperationalError", 30.0
    checks = {c.name: c for c in run(str(node.conf), "c000")}
    assert checks["database"].status == "FAIL" and "unreachable" in checks["database"].message
    assert checks["clock"].status == "FAIL" and "behind" in checks["clock"].message, checks["clock"]
    pinged.offset = -3.0
    assert node.check("clock").status == "warn"
    node.write(free_ports(1)[0])  # nothing listens there
    assert node.check("controller").message.startswith("no controller answers")


def test_the_cuda_probe_sees_exactly_its_gpu(node: Node, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    if nvml_loads():
        pytest.fail("a GPU host: tests/gpu/run.sh runs the CUDA probe on the real driver")
    source = tmp_path / "fake_cuda.c"
    source.write_text(FAKE_LIBCUDA)
    subprocess.run(["gcc", "-shared", "-fPIC", "-o", str(tmp_path / "libcuda.so.1"), str(source)], check=True)
    assert node.check("cuda", gpu=True).message.startswith("no GPU on this machine")  # no driver, no GPU
    monkeypatch.setenv("PSLURM_LIBCUDA", str(tmp_path / "libcuda.so.1"))
    monkeypatch.setenv("FAKE_CUDA_DEVICES", ":".join(map(str, node.devices)))
    cuda = [c for c in run(str(node.conf), "c000", True) if c.name == "cuda"]
    assert [c.status for c in cuda] == ["ok", "ok"], cuda
    assert cuda[1].message == f"GPU 1 ({node.devices[1]}): a CUDA program in a job given it sees exactly it " \
                              "(0000:02:00.0)"
    node.cgroup("ConstrainDevices=no\n")
    cuda = [c for c in run(str(node.conf), "c000", True) if c.name == "cuda"]
    assert [c.message for c in cuda][0] == f"GPU 0 ({node.devices[0]}): a CUDA program in a job given it sees 2 " \
                                           "GPUs: set ConstrainDevices=yes in cgroup.conf"


def test_pslurm_doctor_prints_a_line_a_check_and_fails_when_one_did(node: Node) -> None:
    done = cli("pslurm", "doctor", "-f", str(node.conf), "-N", "c000")
    lines = done.stdout.splitlines()
    assert done.returncode == 0 and lines[-1].startswith("pslurm doctor: 11 checks, nothing failed"), done.stdout
    assert all(line.split(" ", 1)[0] in ("ok", "warn", "FAIL", "skip") for line in lines[:-1])
    node.cgroup("ConstrainDevices=no\n")
    done = cli("pslurm", "doctor", "-f", str(node.conf), "-N", "c000")
    assert done.returncode == 1 and done.stdout.splitlines()[-1].startswith("pslurm doctor: 11 checks, 1 failed "
                                                                            "(isolation)"), done.stdout
