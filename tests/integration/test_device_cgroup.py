"""Real device isolation with a cgroup v1 ``devices`` controller, as root.

Fake GPU nodes (char 195:N) live in a temp dir, never in /dev. Opening an allowed fake node
fails with ENXIO (no driver behind it), a denied one with EPERM: the observable difference.
"""

from __future__ import annotations

import errno
import json
import os
import pwd
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator

import pytest

from pslurm.nodeagent.cgroups import ChildSetup, DeviceCgroups, JobCgroup, affinity_for, parse_cpu_list
from pslurm.nodeagent.gpus import GpuDevice

PROBE = (
    "import json, os, sys\n"
    "out = {}\n"
    "for p in sys.argv[1:]:\n"
    "    try:\n"
    "        os.close(os.open(p, os.O_RDWR)); out[p] = 0\n"
    "    except OSError as e:\n"
    "        out[p] = e.errno\n"
    "print(json.dumps(out))\n"
)


def _skip_reason() -> str | None:
    if os.geteuid() != 0:
        return f"device cgroup tests need root (running as uid {os.geteuid()})"
    return DeviceCgroups.probe()


@pytest.fixture
def cgroups() -> Iterator[DeviceCgroups]:
    reason = _skip_reason()
    if reason:
        pytest.skip(reason)
    cg = DeviceCgroups.detect(parent=f"pslurm-test-{os.getpid()}")
    yield cg
    for name in os.listdir(cg.base) if os.path.isdir(cg.base) else []:
        if name.startswith("job_"):
            JobCgroup(os.path.join(cg.base, name)).remove()
    if os.path.isdir(cg.base):
        os.rmdir(cg.base)


@pytest.fixture
def fake_nodes() -> Iterator[dict[int, str]]:
    # a world-traversable dir, so an unprivileged job user can reach the nodes too
    d = tempfile.mkdtemp(prefix="pslurm-fakegpu-")
    os.chmod(d, 0o755)
    nodes = {}
    try:
        for minor in (0, 1):
            path = os.path.join(d, f"nvidia{minor}")
            try:
                os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(195, minor))
            except PermissionError as exc:
                pytest.skip(f"cannot mknod a fake GPU node: {exc}")
            os.chmod(path, 0o666)
            nodes[minor] = path
        yield nodes
    finally:
        shutil.rmtree(d)


def _probe(
    paths: list[str], setup: ChildSetup | None = None, python: str = sys.executable, **kw: object
) -> dict:
    proc = subprocess.run(
        [python, "-I", "-S", "-c", PROBE, *paths],
        preexec_fn=setup,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        **kw,  # type: ignore[arg-type]
    )
    return json.loads(proc.stdout)


def test_without_cgroup_both_nodes_open_to_enxio(cgroups: DeviceCgroups, fake_nodes: dict[int, str]) -> None:
    # control: with no isolation both fail the same way, so EPERM below is the cgroup's doing
    res = _probe(list(fake_nodes.values()))
    if set(res.values()) == {errno.EACCES}:
        pytest.skip("the temp dir's filesystem is mounted nodev")
    assert res == {fake_nodes[0]: errno.ENXIO, fake_nodes[1]: errno.ENXIO}


def test_job_sees_only_its_gpu(cgroups: DeviceCgroups, fake_nodes: dict[int, str]) -> None:
    job = cgroups.create(4242, [0])
    with open(os.path.join(job.path, "devices.list")) as f:
        rules = f.read().split("\n")
    assert "c 195:0 rwm" in rules and "c 195:255 rwm" in rules and "c 195:1 rwm" not in rules
    with ChildSetup(job) as setup:
        res = _probe([fake_nodes[0], fake_nodes[1], "/dev/null"], setup)
    assert res == {fake_nodes[0]: errno.ENXIO, fake_nodes[1]: errno.EPERM, "/dev/null": 0}
    assert job.pids() == []  # the child has exited and left the cgroup
    assert job.remove()
    assert not os.path.exists(job.path)
    assert job.remove()  # idempotent


def test_isolation_holds_for_an_unprivileged_job_user(
    cgroups: DeviceCgroups, fake_nodes: dict[int, str]
) -> None:
    # the agent (root) opens cgroup.procs; the child writes it after dropping to the job's uid
    try:
        nobody = pwd.getpwnam("nobody").pw_uid
    except KeyError:
        pytest.skip("no 'nobody' user")
    python = shutil.which("python3", path="/usr/bin:/bin")
    if python is None:
        pytest.skip("no system python3 that an unprivileged user can run")
    job = cgroups.create(4243, [1])
    with ChildSetup(job) as setup:
        res = _probe([fake_nodes[0], fake_nodes[1]], setup, python=python, user=nobody, group=nobody)
    assert res == {fake_nodes[0]: errno.EPERM, fake_nodes[1]: errno.ENXIO}
    assert job.remove()


def test_create_is_idempotent_and_tracks_pids(cgroups: DeviceCgroups) -> None:
    job = cgroups.create(4244, [0])
    again = cgroups.create(4244, [0])
    assert again.path == job.path
    with ChildSetup(job) as setup:
        # ChildSetup's preexec_fn does only plain syscalls, safe with threads
        argv = [sys.executable, "-c", "import time; time.sleep(30)"]
        proc = subprocess.Popen(argv, preexec_fn=setup)  # noqa: PLW1509
    try:
        assert job.pids() == [proc.pid]
        assert not job.remove(timeout=0.1)  # busy while the job runs
    finally:
        proc.kill()
        proc.wait()
    assert job.remove()


def test_affinity_applied_in_child(cgroups: DeviceCgroups) -> None:
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        pytest.skip(f"needs at least 2 usable CPUs, have {len(mine)}")
    devices = [
        GpuDevice(0, "gpu", None, "/dev/nvidia0", 0, cores=(mine[0],)),
        GpuDevice(1, "gpu", None, "/dev/nvidia1", 1, cores=(mine[1],)),
    ]
    cpus = affinity_for(devices, [1])
    assert cpus == {mine[1]}
    job = cgroups.create(4245, [1])
    with ChildSetup(job, cpus) as setup:
        out = subprocess.run(
            [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
            preexec_fn=setup,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    assert json.loads(out) == [mine[1]]
    assert job.remove()


def test_affinity_helpers() -> None:
    assert parse_cpu_list("0-3,8, 10-11\n") == (0, 1, 2, 3, 8, 10, 11)
    assert parse_cpu_list("") == ()
    devices = [GpuDevice(0, "gpu", None, None, None), GpuDevice(1, "gpu", None, None, None, cores=(10**6,))]
    assert affinity_for(devices, [0]) is None  # no cores known
    assert affinity_for(devices, [1]) is None  # known but not usable here
