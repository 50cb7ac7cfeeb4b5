"""Real device isolation, as root, each way a node can do it: a cgroup v2 eBPF device program (the
v2 hierarchy taken as a pure v2 host's, via CgroupMountpoint), the cgroup v1 ``devices``
controller (the v2 hierarchy hidden, as on a v1 host), and both at once (this hybrid host as is).

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

from pslurm.core.config import CgroupConfig
from pslurm.nodeagent import bpfdev
from pslurm.nodeagent.cgroupnode import Mounts, NodeCgroups
from pslurm.nodeagent.cgroups import CgroupError, ChildSetup, JobCgroup
from pslurm.nodeagent.cpus import affinity_for, parse_cpu_list
from pslurm.nodeagent.gpus import GpuDevice
from tests.conftest import run_as, wait_for

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
VARIANTS = {"v2": "devices (cgroup v2 bpf)", "v1": "devices (cgroup v1)",
            "hybrid": "devices (cgroup v2 bpf + cgroup v1)"}


def node_cgroups(variant: str, cluster: str, **conf: object) -> NodeCgroups:
    """This host's job cgroups as a pure v2, a pure v1 or (as it is) a hybrid host would have them;
    skips where this host cannot play that part."""
    if os.geteuid() != 0:
        pytest.skip(f"cgroup tests need root (running as uid {os.geteuid()})")
    mounts = Mounts.read()
    if variant != "v1" and not mounts.v2:
        pytest.skip("no cgroup2 hierarchy mounted")
    if variant != "v2" and "devices" not in mounts.v1:
        pytest.skip("no cgroup v1 devices controller mounted")
    if variant == "v2":  # the v2 hierarchy at CgroupMountpoint: what autodetect takes for a v2 host
        mounts, conf = Mounts(mounts.v2, {}), {"mountpoint": mounts.v2[0], **conf}
    elif variant == "v1":
        mounts = Mounts((), mounts.v1)
    cg = NodeCgroups.setup(CgroupConfig(constrain_devices=True, **conf), cluster, "c000", mounts)  # type: ignore[arg-type]
    assert cg is not None
    if cg.isolation != VARIANTS[variant]:
        pytest.skip(f"no {variant} device isolation here: {cg.isolation}")
    return cg


def clean(cg: NodeCgroups) -> None:
    for job in cg.leftovers():
        job.kill_all(5)
        assert job.remove()
    cg.remove_parents()
    assert not any(os.path.exists(os.path.dirname(cg.node_dir(r))) for r in cg.layout.roots)


@pytest.fixture(params=sorted(VARIANTS))
def cgroups(request: pytest.FixtureRequest) -> Iterator[NodeCgroups]:
    cg = node_cgroups(request.param, f"test{os.getpid()}")
    yield cg
    clean(cg)


@pytest.fixture
def fake_nodes() -> Iterator[dict[int, str]]:
    # a world-traversable dir, so an unprivileged job user can reach the nodes too
    d = tempfile.mkdtemp(prefix="pslurm-fakegpu-")
    os.chmod(d, 0o755)
    nodes = {}
    try:
        for minor in (0, 1, 255):
            path = os.path.join(d, f"nvidia{minor}" if minor != 255 else "nvidiactl")
            try:
                os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(195, minor))
            except PermissionError as exc:
                pytest.skip(f"cannot mknod a fake GPU node: {exc}")
            os.chmod(path, 0o666)
            nodes[minor] = path
        if _probe([nodes[0]])[nodes[0]] == errno.EACCES:
            pytest.skip(f"{d} is on a filesystem mounted nodev")
        yield nodes
    finally:
        shutil.rmtree(d)


def _probe(
    paths: list[str], setup: ChildSetup | None = None, python: str = sys.executable, **kw: object
) -> dict:
    proc = subprocess.run(  # type: ignore[call-overload]
        [python, "-I", "-S", "-c", PROBE, *paths],
        preexec_fn=setup,
        capture_output=True,
        text=True,
        timeout=30,
        check=True,
        **kw,
    )
    return json.loads(proc.stdout)


def test_without_cgroup_the_nodes_open_to_enxio(fake_nodes: dict[int, str]) -> None:
    # control: with no isolation all fail the same way, so EPERM below is the cgroup's doing
    assert _probe(list(fake_nodes.values())) == dict.fromkeys(fake_nodes.values(), errno.ENXIO)


def test_job_sees_only_its_gpu(cgroups: NodeCgroups, fake_nodes: dict[int, str]) -> None:
    job = cgroups.create(4242, [0])
    assert job.devices
    if cgroups.layout.devices_v1:
        with open(os.path.join(cgroups.node_dir(cgroups.layout.devices_v1), "job_4242", "devices.list")) as f:
            rules = f.read().split("\n")
        assert "c 195:0 rwm" in rules and "c 195:255 rwm" in rules and "c 195:1 rwm" not in rules
    with ChildSetup(job) as setup:
        res = _probe([fake_nodes[0], fake_nodes[1], fake_nodes[255], "/dev/null", "/dev/urandom"], setup)
    assert res == {fake_nodes[0]: errno.ENXIO, fake_nodes[1]: errno.EPERM, fake_nodes[255]: errno.ENXIO,
                   "/dev/null": 0, "/dev/urandom": 0}
    assert job.pids() == []  # the child has exited and left the cgroup
    assert job.remove()
    assert not any(os.path.exists(d) for d in job.dirs)
    assert job.remove()  # idempotent


def test_job_without_gpus_opens_none(cgroups: NodeCgroups, fake_nodes: dict[int, str]) -> None:
    job = cgroups.create(4246, [])
    with ChildSetup(job) as setup:
        res = _probe([*fake_nodes.values(), "/dev/zero"], setup)
    assert res == {**dict.fromkeys(fake_nodes.values(), errno.EPERM), "/dev/zero": 0}
    assert job.remove()


def test_isolation_holds_for_an_unprivileged_job_user(cgroups: NodeCgroups, fake_nodes: dict[int, str]) -> None:
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


def test_a_busy_cgroup_is_not_taken_over_and_an_empty_leftover_is_replaced(cgroups: NodeCgroups) -> None:
    job = cgroups.create(4244, [0])
    with ChildSetup(job) as setup:
        # ChildSetup's preexec_fn does only plain syscalls, safe with threads
        argv = [sys.executable, "-c", "import time; time.sleep(30)"]
        proc = subprocess.Popen(argv, preexec_fn=setup)  # noqa: PLW1509
    try:
        assert job.pids() == [proc.pid]
        assert not job.remove(timeout=0.1)  # busy while the job runs
        with pytest.raises(CgroupError, match="still has processes"):
            cgroups.create(4244, [1])
    finally:
        proc.kill()
        proc.wait()
    again = cgroups.create(4244, [1])  # the old device program (GPU 0) went with the old directory
    assert again.dirs == job.dirs
    assert again.remove()


def test_kill_ends_a_process_that_left_the_session(cgroups: NodeCgroups, tmp_path) -> None:  # type: ignore[no-untyped-def]
    # v2: cgroup.kill; v1 (no v2 hierarchy): freeze, SIGKILL, thaw
    job = cgroups.create(4247, [])
    pid_file = tmp_path / "escapee"
    script = f"setsid sh -c 'echo $$ > {pid_file}.tmp; mv {pid_file}.tmp {pid_file}; exec sleep 1000' & wait"
    with ChildSetup(job) as setup:
        proc = subprocess.Popen(["sh", "-c", script], preexec_fn=setup, start_new_session=True)  # noqa: PLW1509
    escapee = int(wait_for(lambda: pid_file.exists() and pid_file.read_text().strip(), timeout=5))
    try:
        assert os.getsid(escapee) != proc.pid  # out of the job's session: killpg would miss it
        assert sorted(job.pids()) == sorted([proc.pid, escapee])
        assert job.kill_all(5) == []
        assert proc.wait(timeout=5) == -9
        wait_for(lambda: not os.path.exists(f"/proc/{escapee}"), timeout=5, interval=0.02)
    finally:
        for pid in (proc.pid, escapee):
            try:
                os.kill(pid, 9)
            except ProcessLookupError:
                pass
        proc.wait()
    assert job.remove()


def test_the_node_says_how_it_isolates(cgroups: NodeCgroups) -> None:
    assert cgroups.isolation in VARIANTS.values()
    path = cgroups.create(4248, []).path
    assert path.endswith(f"/pslurm_test{os.getpid()}/c000/job_4248")
    assert JobCgroup(path).remove()


def test_without_constrain_devices_nothing_is_isolated(fake_nodes: dict[int, str]) -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    cg = NodeCgroups.setup(CgroupConfig(), f"test{os.getpid()}b", "c000")
    assert cg is not None and cg.isolation == "none: ConstrainDevices=no"
    try:
        job = cg.create(4249, [])
        assert not job.devices
        with ChildSetup(job) as setup:
            assert _probe([fake_nodes[1]], setup) == {fake_nodes[1]: errno.ENXIO}
    finally:
        clean(cg)


def test_affinity_applied_in_child() -> None:
    mine = sorted(os.sched_getaffinity(0))
    if len(mine) < 2:
        pytest.skip(f"needs at least 2 usable CPUs, have {len(mine)}")
    devices = [
        GpuDevice(0, "gpu", None, "/dev/nvidia0", 0, cores=(mine[0],)),
        GpuDevice(1, "gpu", None, "/dev/nvidia1", 1, cores=(mine[1],)),
    ]
    cpus = affinity_for(devices, [1])
    assert cpus == {mine[1]}
    with ChildSetup(None, cpus) as setup:
        out = subprocess.run(
            [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"],
            preexec_fn=setup,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
    assert json.loads(out) == [mine[1]]


def test_affinity_helpers() -> None:
    assert parse_cpu_list("0-3,8, 10-11\n") == (0, 1, 2, 3, 8, 10, 11)
    assert parse_cpu_list("") == ()
    devices = [GpuDevice(0, "gpu", None, None, None), GpuDevice(1, "gpu", None, None, None, cores=(10**6,))]
    assert affinity_for(devices, [0]) is None  # no cores known
    assert affinity_for(devices, [1]) is None  # known but not usable here


def test_bpf_refusals_say_why_in_one_line() -> None:
    if os.geteuid() != 0:
        pytest.skip("needs root")
    with pytest.raises(bpfdev.BpfError) as refused:  # r0 never set: the verifier's own words
        bpfdev.load_program([bpfdev.Insn(bpfdev.JMP_EXIT)])
    assert str(refused.value) == "bpf(BPF_PROG_LOAD): Permission denied: verifier: R0 !read_ok"
    try:
        nobody = pwd.getpwnam("nobody")
    except KeyError:
        pytest.skip("no 'nobody' user")
    # without CAP_SYS_ADMIN/CAP_BPF (as in an unprivileged container): refused
    said = run_as(nobody.pw_uid, nobody.pw_gid, lambda: bpfdev.load_program(bpfdev.build_program([])) and "loaded")
    assert said == ("bpf(BPF_PROG_LOAD): Operation not permitted "
                    "(needs CAP_SYS_ADMIN or CAP_BPF; a seccomp profile may block bpf())")
