"""pslurm.client against a real controller (in this process, its HTTP/JSON API on loopback) and one
real node agent: typed views of the replies out, one-line errors, and the commands' JSON shape."""

from __future__ import annotations

import getpass
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from pslurm.auth.credential import create_key
from pslurm.client import (
    AuthenticationFailed,
    Client,
    ClientError,
    ClusterInfo,
    ConfigurationError,
    ControllerUnreachable,
    InvalidRequest,
    JobInfo,
    JobPriority,
    NodeInfo,
    NotFound,
    OutputChunk,
    PartitionInfo,
    PriorityWeights,
)
from pslurm.cluster.local import free_ports
from pslurm.core.config import PartitionConfig
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.node import NodeStatus
from pslurm.core.request import JobOptions, build_spec
from pslurm.core.states import JobReason, JobState, NodeState
from tests.conftest import wait_for


def write_conf(root: Path, controller_port: int, agent_port: int, rest_port: int | None = None) -> Path:
    conf = root / "pslurm.conf"
    rest_port = rest_port or free_ports(1)[0]
    conf.write_text(f"""ClusterName=clienttest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort={controller_port}
RestPort={rest_port}
StateSaveLocation={root}
SlurmdSpoolDir={root}/spool
SlurmdTimeout=10
KillWait=1
NodeName=c000 NodeAddr=127.0.0.1 Port={agent_port} CPUs=2 RealMemory=1000
PartitionName=gpu Nodes=c000 Default=YES
""")
    create_key(str(root / "pslurm.key"))
    return conf


class Running:
    def __init__(self, root: Path, conf: Path) -> None:
        self.root, self.conf = root, conf
        self.client = Client(conf)

    def spec(self, *argv: str, interactive: bool = False, **options: object) -> JobSpec:
        script = None if argv else "#!/bin/sh\nsleep 60\n"
        return build_spec(JobOptions(output="/dev/null", **options), user=getpass.getuser(),  # type: ignore[arg-type]
                          uid=os.getuid(), gid=os.getgid(), cwd=str(self.root), environ={"PATH": os.environ["PATH"]},
                          script=script, argv=argv, default_name="t", interactive=interactive)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    """A controller in a thread of this process and the agent of its one node as a process."""
    from pslurm.controller.app import serve

    root = tmp_path_factory.mktemp("client")
    controller_port, agent_port = free_ports(2)
    conf = write_conf(root, controller_port, agent_port)
    ready, stop = threading.Event(), threading.Event()
    thread = threading.Thread(target=serve, args=(str(conf), ready, stop), daemon=True)
    thread.start()
    assert ready.wait(30)
    log = open(root / "psd.log", "ab")
    agent = subprocess.Popen([sys.executable, "-m", "pslurm.nodeagent.app", "-f", str(conf), "-N", "c000"],
                             stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    running = Running(root, conf)
    try:
        wait_for(lambda: running.client.nodes()[0].display_state == "idle")
        yield running
    finally:
        running.client.close()
        agent.terminate()
        agent.wait(timeout=15)
        log.close()
        stop.set()
        thread.join(timeout=15)


def test_submit_jobs_and_job_return_views(cluster: Running) -> None:
    client = cluster.client
    job_id = client.submit(cluster.spec(job_name="held", hold=True))
    assert isinstance(job_id, int)
    wait_for(lambda: client.job(job_id).reason is JobReason.JOB_HELD_USER)  # type: ignore[union-attr]  # a pass
    [job] = client.jobs(job_ids=[job_id])
    assert isinstance(job, JobInfo) and job.spec.uid == os.getuid()
    assert job.state is JobState.PENDING and job.reason is JobReason.JOB_HELD_USER and job.hold == "user"
    assert job.spec.name == "held" and job.spec.script is not None and job.partition == "gpu"
    assert job.display_id == str(job_id)
    assert client.job(job_id).data == job.data  # type: ignore[union-attr]
    assert client.job(999999) is None
    # filters by state name, short code or enum; a light listing leaves the script out
    assert job_id in [j.job_id for j in client.jobs(states=["PD"], light=True)]
    assert job_id in [j.job_id for j in client.jobs(states=[JobState.PENDING])]
    assert job_id not in [j.job_id for j in client.jobs(states=["RUNNING"])]
    assert [j.spec.script for j in client.jobs(job_ids=[job_id], light=True)] == [None]
    assert client.cancel([job_id]) == []
    assert client.job(job_id).state is JobState.CANCELLED  # type: ignore[union-attr]


def test_arrays_collapse_and_display_ids(cluster: Running) -> None:
    client = cluster.client
    first = client.submit(cluster.spec(array="0-3", hold=True))
    wait_for(lambda: {t.reason for t in client.jobs(job_ids=[first])} == {JobReason.JOB_HELD_USER})
    tasks = client.jobs(job_ids=[first])
    assert [t.display_id for t in tasks] == [f"{first}_{i}" for i in range(4)]
    assert all(t.spec.data is tasks[0].spec.data for t in tasks)  # one request sent once, shared
    [row] = [j for j in client.jobs(collapse_arrays=True) if j.array_job_id == first]
    assert row.collapsed_tasks == "0-3"
    assert client.cancel(job_specs=[f"{first}_[1-2]"]) == []
    states = {t.display_id: t.state for t in client.jobs(job_ids=[first], include_finished=True)}
    assert states[f"{first}_1"] is JobState.CANCELLED and states[f"{first}_0"] is JobState.PENDING
    assert client.cancel([first]) == []


def test_hold_release_and_update_job(cluster: Running) -> None:
    client = cluster.client
    before = client.submit(cluster.spec(hold=True))
    job_id = client.submit(cluster.spec(hold=True, dependency=f"afterok:{before}"))  # released, it still waits
    assert client.release(job_id) == []
    assert client.update_job(job_id, nice=5) == []
    job = client.job(job_id)
    assert job is not None and job.hold == ""
    wait_for(lambda: client.job(job_id).reason is JobReason.DEPENDENCY)  # type: ignore[union-attr]  # the next pass
    assert [j.spec.nice for j in client.jobs(job_ids=[job_id], light=True)] == [5]
    assert client.hold(job_id) == []
    assert client.job(job_id).hold != ""  # type: ignore[union-attr]
    assert client.update_job(999999, action="hold") != []
    assert client.cancel([job_id, before]) == []


def test_cluster_nodes_partitions_and_update_node(cluster: Running) -> None:
    client = cluster.client
    info = client.cluster()
    assert isinstance(info, ClusterInfo) and info.name == "clienttest"
    [part] = info.partitions
    assert isinstance(part, PartitionInfo) and part.default and part.nodes == ("c000",) and part.max_time is None
    [node] = client.nodes()
    assert isinstance(node, NodeInfo) and node.state is NodeState.UP and node.partitions == ("gpu",)
    assert node.cpus == 2 and node.real_memory == 1000 and node.target.startswith("127.0.0.1:")
    assert [p.name for p in client.partitions()] == ["gpu"] and client.node("nope") is None
    assert client.node("c000").data == node.data  # type: ignore[union-attr]
    drained = client.update_node("c000", "DRAIN", "maintenance")
    assert isinstance(drained, NodeInfo) and drained.drain and drained.reason == "maintenance"
    assert drained.display_state == "drain"
    resumed = client.update_node("c000", "RESUME")
    assert not resumed.drain and resumed.display_state == "idle"
    with pytest.raises(NotFound) as err:
        client.update_node("zz", "DRAIN", "x")
    assert str(err.value) == "Invalid node name specified: zz" and err.value.remote


def test_priorities(cluster: Running) -> None:
    client = cluster.client
    job_id = client.submit(cluster.spec(hold=True))
    jobs, weights = client.priorities(job_ids=[job_id])
    assert isinstance(weights, PriorityWeights)
    assert all(isinstance(j, JobPriority) for j in jobs)
    assert [j.display_id for j in jobs] in ([str(job_id)], [])  # held jobs may be left out
    client.cancel([job_id])


def test_wait_follows_a_job_to_its_end(cluster: Running) -> None:
    client = cluster.client
    job_id = client.submit(cluster.spec(hold=True))
    seen = []
    for job in client.wait(job_id):
        seen.append(job.state)
        if job.state is JobState.PENDING and len(seen) == 1:
            client.cancel([job_id])
    assert seen[0] is JobState.PENDING and seen[-1] is JobState.CANCELLED
    with pytest.raises(NotFound) as err:
        list(client.wait(999999))
    assert "Invalid job id specified" in str(err.value)


def test_output_and_input_of_an_interactive_job(cluster: Running) -> None:
    client = cluster.client
    job_id = client.submit(cluster.spec("sh", "-c", "read line; echo got $line; echo oops >&2; exit 3",
                                        interactive=True))
    job = next(j for j in client.wait(job_id) if j.state is not JobState.PENDING)
    assert job.state is JobState.RUNNING and job.node == "c000"
    sending = client.send_input(job, iter([b"hello\n"]))
    chunks = list(client.output(job))
    sending.close()
    assert all(isinstance(c, OutputChunk) for c in chunks)
    assert b"".join(c.stdout for c in chunks) == b"got hello\n"
    assert b"".join(c.stderr for c in chunks) == b"oops\n"
    assert chunks[-1].done and chunks[-1].state is JobState.FAILED and chunks[-1].exit_code == 3
    ended = wait_for(lambda: (j := client.job(job_id)) is not None and j.state.is_final and j)
    assert ended.state is JobState.FAILED and ended.reason is JobReason.NON_ZERO_EXIT_CODE


def test_requests_the_controller_refuses_are_one_line_errors(cluster: Running) -> None:
    client = cluster.client
    with pytest.raises(InvalidRequest) as err:
        client.submit(cluster.spec(partition="nopart"))
    assert err.value.remote and "\n" not in str(err.value) and "nopart" in str(err.value)
    assert client.cancel([999999]) == ["Kill job error on job id 999999: Invalid job id specified"]
    with pytest.raises(InvalidRequest) as bad_state:
        client.jobs(states=["bogus"])
    assert str(bad_state.value) == "Invalid job state specified: bogus" and not bad_state.value.remote


def test_a_wrong_key_is_refused_by_the_controller(cluster: Running, tmp_path: Path) -> None:
    from dataclasses import replace

    from pslurm.core.config import load_cluster_config

    create_key(str(tmp_path / "other.key"))
    config = replace(load_cluster_config(str(cluster.conf)), auth_key=str(tmp_path / "other.key"))
    with Client(config) as client, pytest.raises(AuthenticationFailed) as err:
        client.jobs()
    assert err.value.remote and str(err.value).startswith("authentication failed: ")


def test_an_unreachable_controller(tmp_path: Path) -> None:
    port, agent, rest = free_ports(3)
    with Client(write_conf(tmp_path, port, agent, rest), timeout=5) as client:
        with pytest.raises(ControllerUnreachable) as err:
            client.jobs()
        assert str(err.value) == (f"Unable to contact pslurm controller at 127.0.0.1:{port} (connect failure): "
                                  "is the cluster up?")
        assert not err.value.remote and err.value.target == f"127.0.0.1:{port}"
        with pytest.raises(ControllerUnreachable):
            next(client.wait(1))


def test_no_configuration_and_no_credential(tmp_path: Path) -> None:
    with pytest.raises(ConfigurationError) as err:
        Client(tmp_path / "missing.conf")
    assert str(err.value) == (f"no cluster configuration at {tmp_path / 'missing.conf'}: start one with 'pslurm up' "
                              "or set PSLURM_CONF")
    conf = write_conf(tmp_path, *free_ports(2))
    conf.write_text(conf.read_text() + "AuthKey=/nonexistent/pslurm.key\nAuthSocket=/nonexistent/pslurm.sock\n")
    with Client(conf) as client, pytest.raises(AuthenticationFailed) as auth:
        client.cluster()
    assert not auth.value.remote
    assert str(auth.value) == ("cannot authenticate: cannot read the cluster key /nonexistent/pslurm.key: No such "
                               "file or directory, and no credential service at /nonexistent/pslurm.sock: No such "
                               "file or directory")
    assert isinstance(auth.value, ClientError)


def test_importing_the_client_loads_no_grpc() -> None:
    code = ("import sys, pslurm.client; from pslurm.cli import common, psqueue, pscontrol, psrun, psbatch\n"
            "bad = [m for m in sys.modules if m.split('.')[0] in ('grpc', 'google') or m.startswith('pslurm.proto')]\n"
            "assert not bad, bad")
    subprocess.run([sys.executable, "-c", code], check=True)


# -- the commands' --json: the shape they printed from the wire messages, from domain objects -------


def _wire_json(msg: object) -> dict[str, object]:
    from google.protobuf.json_format import MessageToDict

    return MessageToDict(msg, preserving_proto_field_name=True,  # type: ignore[arg-type]
                         always_print_fields_with_no_presence=True)


def test_json_matches_the_wire_messages() -> None:
    from pslurm.cli import jsonout
    from pslurm.client.models import JobPriority, PriorityWeights
    from pslurm.core import restjson
    from pslurm.core.gres import GresRequest
    from pslurm.core.node import GpuInfo
    from pslurm.proto import convert

    spec = JobSpec(name="a", user="ana", uid=1000, gid=100, workdir="/w", script="#!/bin/sh\n", argv=("x", "y"),
                   environment={"A": "1"}, partition="gpu", stdout="o-%j", time_limit=600, mem_mb=2000,
                   gres=(GresRequest("gpu", "a100", 2), GresRequest("gpu", None, 1)), nice=3, requeue=True,
                   array="0-9%2", nodelist="c000")
    records = [
        JobRecord(job_id=12, spec=spec, state=JobState.RUNNING, reason=JobReason.NONE, submit_time=100.0,
                  start_time=101.5, node="c000", gpu_indices=(0, 1), partition="gpu", time_limit=600,
                  array_job_id=10, array_task_id=2, priority=7, restarts=1, eligible_time=100.0, requeue=True,
                  system_comment="requeued after node failure"),
        JobRecord(job_id=13, spec=JobSpec(name="b", user="bo", uid=1, gid=1, workdir="/"), state=JobState.FAILED,
                  reason=JobReason.NON_ZERO_EXIT_CODE, submit_time=5.0, start_time=6.0, end_time=9.0,
                  exit_code=3, gpu_seconds=12.5, peak_gpu_memory_mb=1500, mean_gpu_util=60.0, partition="cpu",
                  collapsed_tasks="", start_estimate=None, max_rss_kb=51200),
        JobRecord(job_id=14, spec=JobSpec(name="c", user="bo", uid=1, gid=1, workdir="/"), state=JobState.PENDING,
                  reason=JobReason.PRIORITY, submit_time=5.0, start_estimate=50.0, partition="cpu", hold="user",
                  array_job_id=14, array_task_id=0, collapsed_tasks="0-99"),
    ]
    for job in records:
        wire = _wire_json(convert.job_to_pb(job))
        wire["state"] = job.state.value  # the wire has enums; the commands have always printed the names
        wire["reason"] = job.reason.value
        view = JobInfo(json.loads(json.dumps(restjson.job_to_json(job))))
        mine = jsonout.job_json(view, full=True)
        assert mine == {**wire, "job_id": job.job_id}
        light = jsonout.job_json(view)
        assert "environment" not in light["spec"] and "script" not in light["spec"]
    node = NodeStatus(name="c000", addr="10.0.0.1", port=7000, cpus=8, real_memory=16000,
                      gres=(GresRequest("gpu", "a100", 2),), state=NodeState.UP, drain=True, reason="maint",
                      partitions=("gpu",), alloc_cpus=2, alloc_mem=100, alloc_gpus=(1,), display_state="drng",
                      running_jobs=1, last_heartbeat=123.0, isolation="devices",
                      gpus=(GpuInfo(0, type="a100", file="/dev/nvidia0", minor=0, uuid="GPU-1", memory_mb=80000,
                                    cores=(0, 1)), GpuInfo(1)))
    # nodes, partitions and priorities: the shapes of the gRPC messages they had (int64s as strings)
    assert jsonout.node_json(node) == {
        "name": "c000", "addr": "10.0.0.1", "port": 7000, "cpus": 8, "real_memory": "16000",
        "gres": [{"name": "gpu", "type": "a100", "count": 2}], "state": "UP", "drain": True, "reason": "maint",
        "partitions": ["gpu"], "alloc_cpus": 2, "alloc_mem": "100", "alloc_gpus": [1], "display_state": "drng",
        "running_jobs": 1, "last_heartbeat": 123.0, "isolation": "devices",
        "gpus": [{"index": 0, "name": "gpu", "type": "a100", "file": "/dev/nvidia0", "minor": 0, "uuid": "GPU-1",
                  "memory_mb": "80000", "cores": [0, 1]},
                 {"index": 1, "name": "gpu", "type": "", "file": "", "minor": -1, "uuid": "", "memory_mb": "0",
                  "cores": []}]}
    gpu = PartitionConfig("gpu", ("c000", "c001"), default=True, max_time=3600, default_time=60, max_nodes=1,
                          priority_job_factor=2, allow_groups=("lab",))
    assert jsonout.partition_json(gpu) == {
        "name": "gpu", "nodes": ["c000", "c001"], "default": True, "max_time": "3600", "default_time": "60",
        "state": "UP", "max_nodes": 1, "priority_job_factor": 2, "allow_groups": ["lab"]}
    assert jsonout.partition_json(PartitionConfig("cpu", ("c002",))) == {
        "name": "cpu", "nodes": ["c002"], "default": False, "state": "UP", "priority_job_factor": 1,
        "allow_groups": []}
    prio = JobPriority(job_id=14, display_id="14_0", user="bo", account="", partition="cpu", priority=9, age=0.5,
                       fairshare=0.25, jobsize=0.1, partition_factor=1.0, qos=0.0, nice=-2, admin_set=True)
    weights = PriorityWeights(age=1000, fairshare=10, jobsize=5, partition=2, qos=0)
    assert jsonout.priorities_json([prio], weights) == {
        "jobs": [{"job_id": "14", "display_id": "14_0", "user": "bo", "account": "", "partition": "cpu",
                  "priority": "9", "age": 0.5, "fairshare": 0.25, "jobsize": 0.1, "partition_factor": 1.0,
                  "qos": 0.0, "nice": -2, "admin_set": True}],
        "weights": {"age": "1000", "fairshare": "10", "jobsize": "5", "partition": "2", "qos": "0"}}

