"""The table of a job request's fields (core/jobfields.py) against what reads it: JobSpec, the option
table, the agents' wire, the store's columns."""

from __future__ import annotations

import dataclasses

from pslurm.cli.options import JOB_FIELDS, TABLE
from pslurm.core.jobfields import BY_NAME, FIELDS, option_fields
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
