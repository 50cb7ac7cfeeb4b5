"""The read commands' ``--json`` in Slurm's shape (pslurm.cli.slurmjson), against what Slurm 22.05.8
printed: ``slurm_22_05/`` holds ``squeue --json``, ``sinfo --json`` and ``sacct --json`` of a real
Slurm 22.05.8 (4 nodes x 2 GPUs; a running job with ``--gres=gpu:1 -t 10``, a pending one, one that
exited 3), cut to a few records. Every field Slurm printed is there, in Slurm's order, with the same
JSON type, and the values are those of the job."""

from __future__ import annotations

import json
import signal
from pathlib import Path
from typing import Any

import pytest

from pslurm.cli import argv as a
from pslurm.cli import slurmjson
from pslurm.core import restjson
from pslurm.core.clusterinfo import NodeInfo, PartitionInfo
from pslurm.core.config import PartitionConfig
from pslurm.core.gres import GresRequest
from pslurm.core.jobinfo import JobInfo
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.node import GpuInfo, NodeStatus
from pslurm.core.states import JobReason, JobState, NodeState

RECORDED = Path(__file__).parent / "slurm_22_05"
OURS_ONLY = {"warnings", "pslurm"}  # the top's warnings (Slurm 23.02 on), meta's pslurm version


def recorded(name: str) -> dict[str, Any]:
    return json.loads((RECORDED / f"{name}.json").read_text())  # type: ignore[no-any-return]


def same_shape(slurm: Any, ours: Any, path: str = "") -> list[str]:
    """Where ``ours`` differs from Slurm's in shape: a dict's keys and their order, a scalar's JSON type
    (null on either side is any type); a list compares first items. A job's ``sockets`` is a map by
    socket number (pslurm keeps no core map: empty)."""
    if isinstance(slurm, dict):
        if not isinstance(ours, dict):
            return [f"{path}: {type(ours).__name__}, Slurm's an object"]
        if path.endswith(".sockets"):
            return []
        keys = [k for k in ours if k not in OURS_ONLY]
        out = [] if keys == list(slurm) else [f"{path}: keys {keys} != Slurm's {list(slurm)}"]
        return out + [d for k in slurm if k in ours for d in same_shape(slurm[k], ours[k], f"{path}.{k}")]
    if isinstance(slurm, list):
        if not isinstance(ours, list):
            return [f"{path}: {type(ours).__name__}, Slurm's a list"]
        return same_shape(slurm[0], ours[0], f"{path}[0]") if slurm and ours else []
    if slurm is None or ours is None or type(slurm) is type(ours):
        return []
    return [f"{path}: {ours!r} is {type(ours).__name__}, Slurm's {slurm!r} {type(slurm).__name__}"]


SPEC = JobSpec(name="sleeper", user="root", uid=0, gid=0, workdir="/tmp/sl", partition="gpu", time_limit=600,
               gres=(GresRequest("gpu", None, 1),))
RUNNING = JobRecord(job_id=6611, spec=SPEC, state=JobState.RUNNING, reason=JobReason.NONE, submit_time=100.5,
                    start_time=101.7, node="c000", gpu_indices=(0,), partition="gpu", time_limit=600, priority=7,
                    eligible_time=100.5, requeue=True)
PENDING = JobRecord(job_id=6614, spec=JobSpec(name="quick", user="root", uid=0, gid=0, workdir="/tmp/sl"),
                    state=JobState.PENDING, reason=JobReason.PRIORITY, submit_time=100.0, partition="gpu",
                    eligible_time=100.0)
FAILED = JobRecord(job_id=6614, spec=PENDING.spec, state=JobState.FAILED, reason=JobReason.NON_ZERO_EXIT_CODE,
                   submit_time=100.0, start_time=125.0, end_time=125.0, node="c001", exit_code=3, partition="gpu")
NODE = NodeStatus(name="c000", addr="127.0.0.1", port=17000, cpus=8, real_memory=4000,
                  gres=(GresRequest("gpu", None, 2),), state=NodeState.UP, partitions=("gpu",), alloc_cpus=1,
                  alloc_gpus=(0,), display_state="mix", running_jobs=1, last_heartbeat=1795446803.5,
                  gpus=(GpuInfo(0), GpuInfo(1)))


def through_api(job: JobRecord, brief: bool = False) -> JobInfo:
    """The job as a command holds it: the API's JSON (after the wire; a ``brief`` listing's, as psqueue
    asks for), read as it is."""
    data = restjson.job_to_brief_json(job, {}) if brief else restjson.job_to_json(job)
    return JobInfo(json.loads(json.dumps(data)))


def test_squeue_json_has_slurms_fields_in_slurms_order() -> None:
    slurm = recorded("squeue")
    ours = json.loads(slurmjson.dumps(slurmjson.jobs_reply([RUNNING, PENDING], "anchor")))
    assert same_shape(slurm, ours) == []  # meta, errors, and the running job (job_resources too)
    assert same_shape(slurm["jobs"][1], ours["jobs"][1]) == []  # pending: no job_resources
    assert ours["meta"]["plugin"] == slurm["meta"]["plugin"] and ours["errors"] == [] == ours["warnings"]
    running = ours["jobs"][0]
    # the values where Slurm's recorded job and ours asked the same (-J sleeper --gres=gpu:1 -t 10 on c000)
    for key in ("name", "job_state", "state_reason", "nodes", "batch_host", "time_limit", "tres_per_node",
                "gres_detail", "cpus", "node_count", "tasks", "array_job_id", "array_task_id", "exit_code",
                "requeue", "nice", "standard_output", "standard_input", "partition", "user_name", "group_name",
                "show_flags", "cluster", "command", "batch_flag", "billable_tres"):
        assert running[key] == slurm["jobs"][0][key], key
    assert running["tres_alloc_str"] == "cpu=1,node=1,billing=1,gres/gpu=1"  # Slurm's adds mem=: DefMemPerNode
    assert (running["start_time"], running["end_time"], running["submit_time"]) == (101, 701, 100)
    assert running["job_resources"]["nodes"] == "c000" and running["job_resources"]["allocated_hosts"] == 1
    pending = ours["jobs"][1]
    assert (pending["start_time"], pending["end_time"], pending["nodes"], pending["tres_alloc_str"]) == (0, 0, "", "")
    assert pending["state_reason"] == "Priority" and pending["time_limit"] is None  # null: no limit (INFINITE)


def test_the_api_view_prints_as_the_record() -> None:
    for job in (RUNNING, PENDING, FAILED):
        assert slurmjson.job_json(through_api(job), "c") == slurmjson.job_json(job, "c")
        assert slurmjson.job_json(through_api(job, brief=True), "c") == slurmjson.job_json(job, "c")
        assert slurmjson.account_json(through_api(job), "c", 200.0) == slurmjson.account_json(job, "c", 200.0)
    view = NodeInfo(json.loads(json.dumps(restjson.node_to_json(NODE))))
    assert slurmjson.node_json(view) == slurmjson.node_json(NODE)
    part = PartitionConfig("gpu", ("c000",), default=True)
    assert slurmjson.partition_json(PartitionInfo(restjson.partition_to_json(part)), {"c000": view}) == \
        slurmjson.partition_json(part, {"c000": NODE})


def test_array_tasks_held_jobs_and_exit_codes_in_slurms_forms() -> None:
    spec = JobSpec(name="arr", user="u", uid=5, gid=5, workdir="/", array="0-9%2", hold=True)
    task = JobRecord(job_id=21, spec=spec, state=JobState.PENDING, reason=JobReason.JOB_HELD_USER, submit_time=1.0,
                     partition="gpu", array_job_id=20, array_task_id=1, priority=50, hold="user")
    rows = json.loads(json.dumps(slurmjson.jobs_reply([task], "c")))["jobs"]
    assert (rows[0]["array_job_id"], rows[0]["array_task_id"], rows[0]["array_max_tasks"]) == (20, 1, 2)
    assert rows[0]["priority"] == 0 and rows[0]["eligible_time"] == 0  # held: as Slurm shows it
    collapsed = JobRecord(job_id=22, spec=spec, state=JobState.PENDING, reason=JobReason.PRIORITY, submit_time=1.0,
                          partition="gpu", array_job_id=20, array_task_id=2, collapsed_tasks="2-9")
    row = slurmjson.job_json(collapsed, "c")  # squeue's one record for the pending tasks
    assert (row["array_task_id"], row["array_task_string"]) == (None, "2-9%2")
    killed = JobRecord(job_id=23, spec=spec, state=JobState.CANCELLED, reason=JobReason.NONE, submit_time=1.0,
                       start_time=2.0, end_time=3.0, exit_signal=9, partition="gpu")
    assert slurmjson.job_json(FAILED, "c")["exit_code"] == 768 and slurmjson.job_json(killed, "c")["exit_code"] == 9
    assert slurmjson.exit_code_json(3, 0) == {"status": "ERROR", "return_code": 3}
    assert slurmjson.exit_code_json(0, 9) == {"status": "SIGNALED", "return_code": None,
                                              "signal": {"signal_id": 9, "name": signal.strsignal(9)}}


def test_sacct_json_has_slurms_fields_in_slurms_order() -> None:
    slurm = recorded("sacct")
    ours = json.loads(slurmjson.dumps(slurmjson.accounts_reply([RUNNING, FAILED], "anchor", 109.0)))
    assert ours["meta"]["plugin"] == slurm["meta"]["plugin"] == {"type": "openapi/dbv0.0.38",
                                                                  "name": "Slurm OpenAPI DB v0.0.38"}
    for theirs, mine in zip(slurm["jobs"], ours["jobs"], strict=True):
        assert same_shape(theirs, mine) == []
        assert mine["steps"] == []  # no step lines given
    running, failed = ours["jobs"]
    assert running["time"]["elapsed"] == 7 and running["time"]["limit"] == 10 and running["nodes"] == "c000"
    assert running["tres"]["allocated"][-1] == {"type": "gres", "name": "gpu", "id": 1001, "count": 1}
    assert failed["state"] == {"current": "FAILED", "reason": "None"} and failed["exit_code"]["return_code"] == 3
    assert slurm["jobs"][1]["state"] == failed["state"]  # the one that exited 3, as Slurm recorded it


def test_sacct_json_steps_are_psaccts_step_lines_in_slurms_shape() -> None:
    from pslurm.cli.psacct import step_lines

    slurm = recorded("sacct")
    done = JobRecord(job_id=6614, spec=PENDING.spec, state=JobState.COMPLETED, reason=JobReason.NONE,
                     submit_time=100.0, start_time=125.0, end_time=140.0, node="c001", partition="gpu")
    psrun = {"step_id": 0, "name": "hostname", "ntasks": 2, "cpus": 2, "nodes": "c000,c001", "state": "FAILED",
             "exit_code": 3, "start_time": 126.0, "end_time": 130.0}
    ours = json.loads(slurmjson.dumps(slurmjson.accounts_reply(
        [RUNNING, done], "anchor", 109.0, lambda j: step_lines(j, [psrun] if j.job_id == 6614 else []))))
    for theirs, mine in zip(slurm["jobs"], ours["jobs"], strict=True):
        assert same_shape(theirs["steps"], mine["steps"]) == []  # a numbered step's id is a number in dbv0.0.38
    (batch,) = ours["jobs"][0]["steps"]  # the running job's batch step
    assert batch["step"] == {"job_id": 6611, "het": {"component": None}, "id": "batch", "name": "batch"}
    assert batch["state"] == "RUNNING" and batch["time"]["end"] == 0 and batch["time"]["elapsed"] == 7
    assert batch["nodes"] == {"list": ["c000"], "count": 1, "range": "c000"} and batch["tasks"] == {"count": 1}
    assert batch["tres"]["allocated"][-1] == {"type": "gres", "name": "gpu", "id": 1001, "count": 1}
    batch, step = ours["jobs"][1]["steps"]
    assert batch["state"] == "COMPLETED" and batch["time"] == {
        "elapsed": 15, "end": 140, "start": 125, "suspended": 0, "system": {"seconds": 0, "microseconds": 0},
        "total": {"seconds": 0, "microseconds": 0}, "user": {"seconds": 0, "microseconds": 0}}
    assert step["step"]["id"] == 0 and step["step"]["name"] == "hostname" and step["state"] == "FAILED"
    assert step["exit_code"] == {"status": "ERROR", "return_code": 3} and step["tasks"] == {"count": 2}
    assert step["nodes"] == {"list": ["c000", "c001"], "count": 2, "range": "c[000-001]"}
    assert step["time"]["elapsed"] == 4 and step["time"]["start"] == 126 and step["time"]["end"] == 130


def test_sinfo_json_is_slurms_nodes() -> None:
    slurm = recorded("sinfo")
    ours = json.loads(slurmjson.dumps(slurmjson.nodes_reply([NODE])))
    assert same_shape(slurm, ours) == []
    for key in ("name", "state", "state_flags", "gres", "gres_used", "cpus", "alloc_cpus", "idle_cpus", "port",
                "address", "partitions", "tres_used", "tres_weighted", "last_busy"):
        assert ours["nodes"][0][key] == slurm["nodes"][0][key], key
    drained = NodeStatus(name="c1", cpus=4, display_state="drain", drain=True, reason="maint")
    assert (slurmjson.node_json(drained)["state"], slurmjson.node_json(drained)["state_flags"]) == ("idle", ["DRAIN"])


def test_scontrol_partition_json_has_22_05s_fields() -> None:
    # 22.05's scontrol has no --json: slurmrestd's v0.0.38 partition (src/plugins/openapi/v0.0.38/partitions.c)
    keys = ["flags", "preemption_mode", "allowed_allocation_nodes", "allowed_accounts", "allowed_groups",
            "allowed_qos", "alternative", "billing_weights", "default_memory_per_cpu", "default_memory_per_node",
            "default_time_limit", "denied_accounts", "denied_qos", "preemption_grace_time", "maximum_cpus_per_node",
            "maximum_memory_per_cpu", "maximum_memory_per_node", "maximum_nodes_per_job", "max_time_limit",
            "min nodes per job", "name", "nodes", "over_time_limit", "priority_job_factor", "priority_tier", "qos",
            "state", "total_cpus", "total_nodes", "tres"]
    part = PartitionConfig("gpu", ("c000", "c001"), default=True, max_time=3600)
    data = slurmjson.partitions_reply([part], [NODE])["partitions"][0]
    assert list(data) == keys
    assert (data["flags"], data["nodes"], data["max_time_limit"], data["maximum_nodes_per_job"]) == (
        ["default"], "c[000-001]", 60, -1)
    assert data["tres"] == "cpu=8,mem=4000M,node=2,billing=8,gres/gpu=2"  # c001 is not known: not counted


@pytest.mark.parametrize(("argv", "wanted"), [([], None), (["--json"], "slurm"), (["--json=pslurm"], "pslurm"),
                                              (["--json=v0.0.38"], "slurm"), (["--json="], "slurm")])
def test_json_takes_an_optional_format(argv: list[str], wanted: str | None) -> None:
    found, _ = a.parse(argv, (a.JSON,), stop_at_positional=False)
    assert a.json_format("psqueue", a.values(found)) == wanted


def test_an_unknown_json_format_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    found, _ = a.parse(["--json", "-j", "5"], (a.JSON, a.JOBS), stop_at_positional=False)
    assert a.values(found) == {"as_json": None, "jobs": "5"}  # a bare --json never takes the next word
    found, _ = a.parse(["--json=yaml"], (a.JSON,), stop_at_positional=False)
    with pytest.raises(SystemExit):
        a.json_format("squeue", a.values(found))
    assert capsys.readouterr().err.startswith("squeue: error: --json=yaml: unknown JSON format")
