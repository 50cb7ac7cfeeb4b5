"""The table of a job request's fields (core/jobfields.py) against what reads it: JobSpec, the option
table, the agents' wire, the store's columns; and every row through the command line, JobSpec, the
JSON, the store, the wire and the commands' output."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from pslurm.cli.options import JOB_FIELDS, TABLE
from pslurm.core.jobfields import BY_NAME, FIELDS, Field, option_fields
from pslurm.core.jobinfo import JobDesc, JobInfo
from pslurm.core.jobspec import JobSpec
from pslurm.proto import pslurm_pb2 as pb


def test_jobspec_has_the_tables_fields_in_its_order_with_its_defaults() -> None:
    fields = dataclasses.fields(JobSpec)
    assert [f.name for f in fields] == [f.name for f in FIELDS]
    for f in fields:
        if f.name in ("name", "user", "uid", "gid", "workdir"):
            continue  # the request's own: no default
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
        assert default == BY_NAME[f.name].default, f.name


def test_the_wire_carries_each_field_by_its_number() -> None:
    by_name = pb.JobSpec.DESCRIPTOR.fields_by_name
    assert {f.name for f in FIELDS if f.wire} == set(by_name)
    for f in FIELDS:
        if f.wire:
            assert by_name[f.name].number == f.wire, f.name


def test_every_option_a_row_names_is_in_the_option_table() -> None:
    known = {name for opt in TABLE for name in opt.names} | {opt.short for opt in TABLE if opt.short}
    for f in FIELDS:
        for word in f.options.replace(",", " ").split():
            assert word.lstrip("-") in known, (f.name, word)
    given = {opt.dest: opt for opt in TABLE if opt.dest in {f.name for f in FIELDS if f.given}}
    for f in FIELDS:
        if f.given:
            opt = given[f.name]
            assert opt.name == f.long_option and opt.short == f.short_option and opt.help == f.help


def test_the_option_values_are_the_tables() -> None:
    assert JOB_FIELDS == frozenset(option_fields())
    assert len(option_fields()) == len(set(option_fields()))


def test_json_keys_are_distinct_but_the_signal_flags() -> None:
    keys = [f.json for f in FIELDS if f.name not in ("warn_reservation",)]
    assert len(keys) == len(set(keys))
    assert all(f.json for f in FIELDS)


def test_the_stores_columns_are_the_tables_column_rows() -> None:
    from pslurm.controller.store.schema import jobs
    from pslurm.controller.store.specs import JOB_OWN_COLUMNS, SPEC_COLUMNS

    assert {f.name for f in FIELDS if f.column} == {*SPEC_COLUMNS, "gres", *JOB_OWN_COLUMNS}
    assert set(SPEC_COLUMNS.values()) | {"gres", *JOB_OWN_COLUMNS} <= set(jobs.c.keys())


def test_the_tables_bounds_are_admissions_and_the_stores() -> None:
    from pslurm.controller.store.schema import jobs
    from pslurm.controller.store.specs import SPEC_COLUMNS
    from pslurm.core.textlimits import JOB_TEXT_LIMITS

    for name, (_, longest) in JOB_TEXT_LIMITS.items():
        assert BY_NAME[name].max_len == longest, name
    for name, column in SPEC_COLUMNS.items():
        length = getattr(jobs.c[column].type, "length", None)
        if length and BY_NAME[name].type is str:
            assert BY_NAME[name].max_len == length, name


# -- every row through every layer -------------------------------------------------------------------

# A value other than its default for each field a generic rule cannot make up (a field of the table whose
# type is str, int or bool gets one of its own: a stored-and-shown option needs nothing here).
SAMPLES: dict[str, object] = {
    "name": "job", "user": "ana", "uid": 1000, "gid": 100, "workdir": "/w", "script": "#!/bin/sh\ntrue\n",
    "argv": ("x", "y"), "environment": {"A": "1", "EQ": "a=b"}, "partition": "gpu", "time_limit": 5400,
    "num_nodes": 2, "ntasks": 4, "cpus_per_task": 2, "mem_mb": 2048, "requeue": False, "open_mode": "append",
    "nodelist": "c[000-001]", "exclude": "c002", "constraint": "a100&nvlink", "gpu_mem": "8192",
    "dependency": "afterok:12", "array": "0-3%2", "begin_time": 1_700_000_000.0, "deadline": 1_800_000_000.0,
    "warn_signal": 10, "warn_time": 120, "max_nodes": 3, "ntasks_per_node": 2, "mem_per_cpu_mb": 0,
    "mail_type": "BEGIN,END", "submit_sid": 4242, "nice": 5,
}


def _sample(f: Field) -> object:
    if f.name == "gres":
        from pslurm.core.gres import GresRequest

        return (GresRequest("gpu", "a100", 2),)
    if f.name in SAMPLES:
        return SAMPLES[f.name]
    return {str: f"x-{f.name}", int: 7, bool: True}[f.type]


def _spec() -> JobSpec:
    return JobSpec(**{f.name: _sample(f) for f in FIELDS})  # type: ignore[arg-type]


def test_every_row_has_a_sample_other_than_its_default() -> None:
    for f in FIELDS:
        assert _sample(f) != f.default or f.name == "mem_per_cpu_mb", f.name  # --mem and --mem-per-cpu: one


def test_every_field_goes_through_json_store_and_wire_unchanged(tmp_path: Path) -> None:
    from pslurm.controller.store import Store
    from pslurm.core import restjson
    from pslurm.proto import convert

    spec = _spec()
    assert restjson.spec_from_json(json.loads(json.dumps(restjson.spec_to_json(spec)))) == spec
    brief = JobDesc(json.loads(json.dumps(restjson.brief_spec_json(spec, "gpu"))))
    assert {f.name: getattr(brief, f.name) for f in FIELDS} == dataclasses.asdict(spec) | {"gres": spec.gres}
    store = Store(f"sqlite:///{tmp_path / 'fields.db'}")
    store.migrate()
    job_id = store.submit(spec, "gpu", spec.time_limit, 1000.0)
    stored = store.get_job(job_id)
    assert stored is not None and stored.spec == spec
    wire = convert.spec_from_pb(convert.spec_to_pb(spec))
    for f in FIELDS:
        assert getattr(wire, f.name) == (getattr(spec, f.name) if f.wire else f.default), f.name
    store.close()


def test_an_option_given_as_text_is_parsed_stored_and_shown_by_its_row_alone(tmp_path: Path) -> None:
    from pslurm.cli.options import parse_command_line
    from pslurm.cli.psacct import account_fields
    from pslurm.cli.psqueue import job_fields
    from pslurm.cli.scontrol_show import show_job
    from pslurm.controller.store import Store
    from pslurm.core import restjson
    from pslurm.core.jobdesc import spec_values

    given = [f for f in FIELDS if f.given]
    argv = [f"--{f.long_option}" if f.type is bool else f"--{f.long_option}=x-{f.name}" for f in given]
    values = parse_command_line([*argv, "--mail-type=END", "script.sh"], "sbatch").job_values()
    spec = JobSpec(**spec_values(values, user="ana", uid=1000, gid=100, cwd="/w", environ={}, script="true"))
    for f in given:
        assert getattr(spec, f.name) == (True if f.type is bool else f"x-{f.name}"), f.name
    sent = restjson.spec_from_json(json.loads(json.dumps(restjson.desc_to_json(spec_values(
        values, user="ana", uid=1000, gid=100, cwd="/w", environ={}, script="true")))))
    assert dataclasses.replace(sent, submit_sid=spec.submit_sid) == spec
    store = Store(f"sqlite:///{tmp_path / 'given.db'}")
    store.migrate()
    record = store.get_job(store.submit(spec, "gpu", None, 1000.0))
    store.close()
    assert record is not None and record.spec == spec
    view = JobInfo(json.loads(json.dumps(restjson.job_to_json(record))))
    shown = show_job(view, now=2000.0)
    squeue, sacct = job_fields(now=2000.0), account_fields(2000.0)
    for f in given:
        value = getattr(spec, f.name)
        if f.show:
            assert f"{f.show}={value}" in shown, f.name
        if f.squeue:
            assert squeue[f.squeue][1](view) == value, f.name
        if f.sacct:
            assert sacct[f.sacct.lower()](view) == value, f.name
