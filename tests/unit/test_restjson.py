"""The user API's JSON: domain objects round-trip exactly, in slurmrestd's field names, and the
client's views (pslurm.core.jobinfo) read every field of them back."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from pslurm.core import restjson
from pslurm.core.config import PartitionConfig
from pslurm.core.errors import SpecError
from pslurm.core.gres import GresRequest
from pslurm.core.jobinfo import JobInfo
from pslurm.core.jobspec import JobRecord, JobSpec
from pslurm.core.node import GpuInfo, NodeStatus
from pslurm.core.states import JobReason, JobState, NodeState

SPEC = JobSpec(name="a", user="ana", uid=1000, gid=100, workdir="/w", script="#!/bin/sh\n", argv=("x", "y"),
               environment={"A": "1", "EQ": "a=b"}, partition="gpu", stdout="o-%j", time_limit=90, mem_mb=2000,
               gres=(GresRequest("gpu", "a100", 2), GresRequest("gpu", None, 1)), nice=3, requeue=True,
               array="0-9%2", nodelist="c[000-001]", exclude="c002", interactive=False, hold=True,
               dependency="afterok:1", kill_on_invalid_dep=True, account="lab", num_nodes=2, ntasks=3,
               cpus_per_task=4)


def through_json(data: dict[str, object]) -> dict[str, object]:
    return json.loads(json.dumps(data))  # type: ignore[no-any-return]


WIRE_ONLY = {"spec", "cancel_requested", "requeue_requested"}  # the controller's own: not on the wire


def assert_view_is(view: JobInfo, record: JobRecord) -> None:
    """The view answers every field of the record (and of its spec) with the record's value."""
    for f in dataclasses.fields(JobRecord):
        if f.name not in WIRE_ONLY:
            assert getattr(view, f.name) == getattr(record, f.name), f.name
    for f in dataclasses.fields(JobSpec):
        assert getattr(view.spec, f.name) == getattr(record.spec, f.name), f.name


def test_a_submitting_session_is_a_32_bit_id_or_a_one_line_refusal() -> None:
    """A client says which session submitted (squeue's AllocSID): a session id round-trips; anything
    else, however long, is refused in one short line."""
    data = through_json(restjson.spec_to_json(dataclasses.replace(SPEC, submit_sid=4242)))
    assert restjson.spec_from_json(data).submit_sid == 4242
    for hostile in (-1, 2**32, 10**4000, "9" * 5000, "abc", [1]):
        with pytest.raises(SpecError) as refused:
            restjson.spec_from_json({**data, "pslurm": {**data["pslurm"], "submit_sid": hostile}})
        assert "\n" not in str(refused.value) and len(str(refused.value)) < 200, str(refused.value)[:80]


def test_a_job_request_round_trips_in_slurms_names() -> None:
    data = through_json(restjson.spec_to_json(SPEC))
    assert restjson.spec_from_json(data) == SPEC
    assert data["current_working_directory"] == "/w" and data["environment"] == ["A=1", "EQ=a=b"]
    assert data["time_limit"] == {"set": True, "infinite": False, "number": 2}  # minutes, as Slurm's
    assert data["tres_per_node"] == "gres/gpu:a100:2,gres/gpu:1" and data["tasks"] == 3
    bare = JobSpec(name="b", user="bo", uid=1, gid=1, workdir="/")
    assert restjson.spec_from_json(through_json(restjson.spec_to_json(bare))) == bare


def test_a_slurm_shaped_request_without_pslurms_keys_is_read() -> None:
    spec = restjson.spec_from_json({"name": "s", "user_id": "5", "group_id": "5", "current_working_directory": "/",
                                    "script": "#!/bin/sh\n", "time_limit": {"set": True, "number": 3},
                                    "tres_per_node": "gres/gpu:2", "environment": ["X=1"]})
    assert spec.time_limit == 180 and spec.gres == (GresRequest("gpu", None, 2),) and spec.uid == 5
    assert spec.environment == {"X": "1"}


def test_jobs_round_trip_and_share_their_spec_in_a_listing() -> None:
    records = [
        JobRecord(job_id=12, spec=SPEC, state=JobState.RUNNING, reason=JobReason.NONE, submit_time=100.5,
                  start_time=101.5, node="c000", gpu_indices=(0, 1), partition="gpu", time_limit=600,
                  array_job_id=10, array_task_id=2, priority=7, restarts=1, eligible_time=100.0, requeue=True,
                  system_comment="requeued after node failure"),
        JobRecord(job_id=13, spec=SPEC, state=JobState.FAILED, reason=JobReason.NON_ZERO_EXIT_CODE, submit_time=5.0,
                  start_time=6.0, end_time=9.0, exit_code=3, exit_signal=9, gpu_seconds=12.5, peak_gpu_memory_mb=1500,
                  mean_gpu_util=60.0, partition="gpu", hold="user", start_estimate=50.0, collapsed_tasks="0-99",
                  state_desc="job requeued in held state", reason_prev=JobReason.JOB_HELD_USER),
    ]
    specs: dict[int, dict[str, object]] = {}
    wire = through_json({"jobs": [restjson.job_to_json(j, specs=specs) for j in records]})
    back = [JobInfo(j) for j in wire["jobs"]]  # type: ignore[attr-defined]
    for view, record in zip(back, records, strict=True):
        assert_view_is(view, record)
    assert back[1].own["job"]["pslurm"]["spec_ref"] == back[0].own["job"]["pslurm"]["spec_ref"]
    first = wire["jobs"][0]  # type: ignore[index]
    assert first["job_state"] == ["RUNNING"] and first["state_reason"] == "None" and first["user_name"] == "ana"
    assert first["array_task_id"] == {"set": True, "infinite": False, "number": 2} and first["nodes"] == "c000"


def test_a_brief_listing_round_trips_and_carries_each_request_once() -> None:
    bare = JobSpec(name="b", user="bo", uid=1, gid=0, workdir="")
    records = [
        JobRecord(job_id=12, spec=SPEC, state=JobState.RUNNING, reason=JobReason.NONE, submit_time=100.5,
                  start_time=101.5, node="c000", gpu_indices=(0, 1), partition="gpu", time_limit=600,
                  array_job_id=10, array_task_id=2, priority=7, restarts=1, eligible_time=100.0, requeue=True,
                  system_comment="requeued after node failure"),
        JobRecord(job_id=13, spec=SPEC, state=JobState.FAILED, reason=JobReason.NON_ZERO_EXIT_CODE, submit_time=5.0,
                  start_time=6.0, end_time=9.0, exit_code=3, exit_signal=9, gpu_seconds=12.5, peak_gpu_memory_mb=1500,
                  mean_gpu_util=60.0, partition="gpu", hold="user", start_estimate=50.0, collapsed_tasks="0-99",
                  state_desc="job requeued in held state", reason_prev=JobReason.JOB_HELD_USER),
        JobRecord(job_id=14, spec=bare, state=JobState.PENDING, submit_time=7.0),
        JobRecord(job_id=15, spec=bare, state=JobState.PENDING, reason=JobReason.PRIORITY, submit_time=8.0,
                  partition="debug"),
    ]
    refs: dict[int, int] = {}
    wire: list[dict[str, Any]] = json.loads(json.dumps([restjson.job_to_brief_json(j, refs) for j in records]))
    assert ["job" in j["pslurm"] for j in wire] == [True, False, True, False]
    assert [j["pslurm"]["spec_ref"] for j in wire] == [1, 1, 2, 2]
    jobs = restjson.share_specs(wire)
    raw = [restjson.job_to_brief_json(j, {}) for j in records[:2]]
    back = [JobInfo(j) for j in jobs]
    for view, record in zip(back, records, strict=True):
        assert_view_is(view, record)
    assert back[0].spec.data is back[1].spec.data and back[2].spec.data is back[3].spec.data
    assert jobs[0]["pslurm"]["job"] is jobs[1]["pslurm"]["job"]  # one dict, shared
    pending = jobs[2]
    assert pending["job_state"] == ["PENDING"] and pending["submit_time"]["number"] == 7.0
    assert "start_time" not in pending and "exit_code" not in pending and "array_job_id" not in pending
    assert restjson.job_to_json(records[0])["pslurm"]["job"]["environment"] == raw[0]["pslurm"]["job"]["environment"]


def test_nodes_and_partitions_round_trip() -> None:
    node = NodeStatus(name="c000", addr="10.0.0.1", port=7000, cpus=8, real_memory=16000,
                      gres=(GresRequest("gpu", "a100", 2),), state=NodeState.UP, drain=True, reason="maint",
                      partitions=("gpu",), alloc_cpus=2, alloc_mem=100, alloc_gpus=(1,), display_state="drng",
                      running_jobs=1, last_heartbeat=123.0, isolation="devices",
                      gpus=(GpuInfo(0, type="a100", file="/dev/nvidia0", minor=0, uuid="GPU-1", memory_mb=80000,
                                    cores=(0, 1)), GpuInfo(1)))
    data = through_json(restjson.node_to_json(node))
    assert restjson.node_from_json(data) == node and data["state"] == ["MIXED", "DRAIN"]
    for part in (PartitionConfig("gpu", ("c000", "c001"), default=True, max_time=3601, default_time=60,
                                 max_nodes=1, priority_job_factor=2, allow_groups=("lab", "ops")),
                 PartitionConfig("cpu", ("c002",), state="DOWN")):
        assert restjson.partition_from_json(through_json(restjson.partition_to_json(part))) == part


def test_output_chunks_round_trip() -> None:
    from pslurm.core.steps import StepResult, TaskEnd

    end = StepResult(JobState.FAILED, 3, 0, tasks=(TaskEnd(0, 3, 0, "c000"), TaskEnd(1, 0, 9, "c001")))
    line = through_json(restjson.output_chunk_to_json(b"\x00out", b"err", end))
    assert restjson.output_chunk_from_json(line) == (b"\x00out", b"err", end)
    assert restjson.output_chunk_from_json(through_json(restjson.output_chunk_to_json(b"x", b""))) == (b"x", b"", None)


# -- the views the commands read the JSON with (pslurm.core.jobinfo) ----------------------------------


def test_a_job_view_has_the_records_values() -> None:
    from pslurm.core.jobinfo import JobInfo

    record = JobRecord(job_id=12, spec=SPEC, state=JobState.PENDING, reason=JobReason.DEPENDENCY, submit_time=1.5,
                       array_job_id=10, array_task_id=2, hold="admin", start_estimate=9.0, collapsed_tasks="2-3")
    view = JobInfo(through_json(restjson.job_to_json(record)))
    assert view.display_id == record.display_id == "10_2"
    for name in ("job_id", "state", "reason", "submit_time", "start_time", "node", "gpu_indices", "exit_code",
                 "array_task_id", "hold", "start_estimate", "collapsed_tasks", "partition", "time_limit"):
        assert getattr(view, name) == getattr(record, name), name
    assert view.spec.cpus == SPEC.cpus and view.spec.gpus() == SPEC.gpus() and view.spec.gres == SPEC.gres
    assert view.spec.environment == SPEC.environment and view.spec.time_limit == SPEC.time_limit


def test_options_give_the_same_request_as_a_jobspec_or_as_json() -> None:
    from pslurm.core.jobdesc import spec_values
    from pslurm.core.request import JobOptions, build_spec

    opts = JobOptions(job_name="t", time="1:30", gres="gpu:a100:1", gpus="2", mem="2G", nice="5", export="NONE,A=1",
                      nodelist="c[000-001]", requeue=False, array="0-3")
    kwargs = dict(user="ana", uid=1, gid=2, cwd="/w", environ={"PATH": "/bin"}, script="#!/bin/sh\n", umask=0o22)
    spec = build_spec(opts, **kwargs)  # type: ignore[arg-type]
    given = {k: v for k, v in vars(opts).items() if v is not None}
    assert restjson.desc_to_json(spec_values(given, **kwargs)) == restjson.spec_to_json(spec)  # type: ignore[arg-type]
    assert restjson.spec_from_json(through_json(restjson.spec_to_json(spec))) == spec


def test_the_commands_print_a_view_as_they_printed_the_record() -> None:
    from pslurm.cli.jobview import dependency_text, gres_text
    from pslurm.cli.jsonout import job_json
    from pslurm.cli.psacct import account_fields
    from pslurm.cli.pscontrol import show_job
    from pslurm.cli.psqueue import job_fields

    record = JobRecord(job_id=12, spec=SPEC, state=JobState.PENDING, reason=JobReason.DEPENDENCY, submit_time=1.5,
                       array_job_id=10, array_task_id=2, partition="gpu", time_limit=90, start_estimate=9.0)
    view = JobInfo(through_json(restjson.job_to_json(record)))
    brief = JobInfo(restjson.share_specs([through_json(restjson.job_to_brief_json(record, {}))])[0])
    assert job_json(view, full=True)["spec"]["environment"] == SPEC.environment
    assert job_json(brief) == job_json(view)  # the brief listing reads as the whole record
    assert "JobState=PENDING Reason=Dependency Dependency=afterok:1(unfulfilled)" in show_job(view)
    assert (dependency_text(view), gres_text(view.spec)) == ("afterok:1(unfulfilled)", "gpu:a100:2,gpu:1")
    fields = job_fields()
    assert [fields[c][1](view) for c in "iTrlbE"] == [
        "10_2", "PENDING", "Dependency", "1:30", "gres:gpu:a100:2,gres:gpu:1", "afterok:1(unfulfilled)"]
    for letter, (_, get) in fields.items():
        assert get(brief) == get(view), letter
    for name, get in account_fields(now=100.0).items():
        assert get(brief) == get(view), name


def test_the_node_and_partition_views_read_every_field() -> None:
    import dataclasses

    from pslurm.core.clusterinfo import NODE_FIELDS, PARTITION_FIELDS, NodeInfo, PartitionInfo

    assert set(NODE_FIELDS) == {f.name for f in dataclasses.fields(NodeStatus)}
    assert set(PARTITION_FIELDS) == {f.name for f in dataclasses.fields(PartitionConfig)}
    node = NodeStatus(name="c000", addr="10.0.0.1", port=7000, cpus=8, real_memory=16000,
                      gres=(GresRequest("gpu", "a100", 2),), state=NodeState.UP, drain=True, display_state="drng",
                      gpus=(GpuInfo(0, type="a100"),))
    view = NodeInfo(through_json(restjson.node_to_json(node)))
    assert (view.display_state, view.cpus, view.gres, view.gpus) == ("drng", 8, node.gres, node.gpus)
    part = PartitionConfig("gpu", ("c000",), default=True, max_time=3600, max_nodes=1)
    pview = PartitionInfo(through_json(restjson.partition_to_json(part)))
    assert (pview.name, pview.default, pview.max_time, pview.nodes, pview.max_nodes) == ("gpu", True, 3600,
                                                                                        ("c000",), 1)


def test_open_mode_is_carried_under_pslurm() -> None:
    import dataclasses

    import pytest

    from pslurm.core.errors import SpecError

    spec = dataclasses.replace(SPEC, open_mode="append")
    data = through_json(restjson.spec_to_json(spec))
    assert data["pslurm"]["open_mode"] == "append"  # type: ignore[index]
    assert restjson.spec_from_json(data) == spec
    assert "open_mode" not in restjson.spec_to_json(SPEC)["pslurm"]
    record = JobRecord(job_id=5, spec=spec, state=JobState.PENDING)
    assert JobInfo(through_json(restjson.job_to_json(record))).spec.open_mode == "append"
    brief = through_json(restjson.job_to_brief_json(record, {}))
    assert JobInfo(brief).spec.open_mode == "append"
    data["pslurm"]["open_mode"] = "sideways"  # type: ignore[index]
    with pytest.raises(SpecError):
        restjson.spec_from_json(data)
