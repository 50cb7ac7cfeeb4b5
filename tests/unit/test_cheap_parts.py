"""The commands' start keeps two standard modules off its path (docs/benchmarks.md): the states are not
``enum.StrEnum``s and ``--mem`` is not read by a regular expression. Each is checked here against what it
replaced: the states against a StrEnum of the same members, the size reader against the old expression."""

from __future__ import annotations

import copy
import enum
import pickle
import re

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pslurm.core.errors import SpecError
from pslurm.core.jobdesc import gpu_mem_option, mem_parts, parse_mem
from pslurm.core.states import FINAL_STATES, JobReason, JobState, NodeState

STATES = (JobState, JobReason, NodeState)


@pytest.mark.parametrize("cls", STATES, ids=lambda c: c.__name__)
def test_the_states_behave_as_the_str_enums_they_were(cls: type) -> None:
    twin = enum.StrEnum(cls.__name__, [(m.name, m.value) for m in cls])  # type: ignore[misc]
    assert [(m.name, m.value) for m in cls] == [(m.name, m.value) for m in twin]
    assert len(cls) == len(twin) and list(cls.__members__) == list(twin.__members__)
    for member, other in zip(cls, twin, strict=True):
        assert cls(member.value) is member and cls(member) is member and getattr(cls, member.name) is member
        assert isinstance(member, cls) and isinstance(member, str) and member == other == member.value
        assert hash(member) == hash(member.value) and {member.value: 1}[member] == 1
        assert str(member) == str(other) and f"{member}" == f"{other}" and f"{member:>30}" == f"{other:>30}"
        assert repr(member) == repr(other)
        assert member in cls and member.value in cls
        assert pickle.loads(pickle.dumps(member)) is member
        assert copy.copy(member) is member and copy.deepcopy([member])[0] is member
    with pytest.raises(ValueError, match="is not a valid"):
        cls("no such word")
    assert "no such word" not in cls and 1 not in cls


def test_the_states_own_methods() -> None:
    assert JobState.parse("cd") is JobState.COMPLETED and JobState.parse(" running ") is JobState.RUNNING
    with pytest.raises(ValueError, match="Invalid job state specified: XX"):
        JobState.parse("XX")
    assert JobState.PENDING.short == "PD" and JobState.CANCELLED.is_final and not JobState.RUNNING.is_final
    assert JobState.SUSPENDED.holds_resources and not JobState.PENDING.holds_resources
    assert JobState.COMPLETED in FINAL_STATES and "COMPLETED" in FINAL_STATES
    assert JobReason.parse("JobHeldUser") is JobReason.JOB_HELD_USER and JobReason.parse(None) is JobReason.NONE
    assert JobReason.parse("bogus") is JobReason.NONE and not JobReason.RESOURCES.is_kept_wait
    assert JobReason.DEPENDENCY.is_kept_wait and JobReason.JOB_HELD_USER.name == "JOB_HELD_USER"


_MEM = re.compile(r"^(\d+)([KMGT]?)B?$", re.I)  # what --mem and --gpu-mem were read with


def _by_expression(text: str) -> tuple[int, str] | None:
    match = _MEM.match(text.strip())
    return (int(match.group(1)), match.group(2).upper()) if match else None


SIZE_TEXT = st.one_of(
    st.text(),
    st.builds(lambda pre, n, unit, b, post: f"{pre}{n}{unit}{b}{post}", st.sampled_from(["", " ", "\t", "\n", "x"]),
              st.one_of(st.integers(0, 10**12).map(str), st.text("0123456789\u0663\u0967\u00b2", min_size=1)),
              st.sampled_from(["", "k", "K", "m", "M", "g", "G", "t", "T", "P", "b", "\u212a", "\u0130"]),
              st.sampled_from(["", "b", "B", "bb", "i"]), st.sampled_from(["", " ", "\n", "\n\n", "x", "\u00a0"])),
)


@given(SIZE_TEXT)
@example("12\n")
@example("4GB")
@example("\u0663\u0663M")
def test_sizes_are_read_as_the_expression_read_them(text: str) -> None:
    old = _by_expression(text)
    if old is not None and old[1] not in ("", "K", "M", "G", "T"):
        # the expression took the Kelvin sign for K under re.I and the parsers then failed with a KeyError;
        # now it is refused as any other unknown unit
        assert mem_parts(text) is None
        return
    assert mem_parts(text) == old


def test_mem_and_gpu_mem_read_sizes_as_before() -> None:
    assert [parse_mem(t) for t in ("4096", "4G", "512m", "1T", "1kb", "0", " 2GB ")] == [4096, 4096, 512, 1048576, 1,
                                                                                       0, 2048]
    assert gpu_mem_option("8g") == "8192" and gpu_mem_option(" AUTO ") == "auto" and gpu_mem_option(None) == ""
    for bad in ("", "G", "4X", "4GBB", "-1", "4 G", "4\u212a"):
        with pytest.raises(SpecError, match="Invalid --mem specification"):
            parse_mem(bad)
    with pytest.raises(SpecError, match="Invalid --gpu-mem specification"):
        gpu_mem_option("0G")


@given(st.binary(), st.binary(), st.text("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=\n -_é"))
def test_the_output_stream_encodes_as_base64_did(stdout: bytes, stderr: bytes, received: str) -> None:
    import base64

    from pslurm.core.restjson import output_chunk_from_json, output_chunk_to_json

    data = output_chunk_to_json(stdout, stderr)
    assert data == {"stdout": base64.b64encode(stdout).decode(), "stderr": base64.b64encode(stderr).decode()}
    assert output_chunk_from_json(data) == (stdout, stderr, None)
    try:
        expected: object = base64.b64decode(received)
    except ValueError as exc:  # binascii.Error is one
        expected = type(exc)
    try:
        got: object = output_chunk_from_json({"stdout": received})[0]
    except ValueError as exc:
        got = type(exc)
    assert got == expected


def test_psrun_stdin_channel_hands_over_every_chunk_in_order() -> None:
    import threading

    from pslurm.cli.psrun import _Channel

    channel = _Channel()
    chunks = [str(i).encode() for i in range(2000)]

    def produce() -> None:
        for chunk in chunks:
            channel.put(chunk)
        channel.put(None)

    producer = threading.Thread(target=produce)
    producer.start()
    got = []
    while (item := channel.get()) is not None:
        got.append(item)
    producer.join()
    assert got == chunks
    channel.put(b"x")
    channel.put(b"y")  # a second put while the lock is released already
    assert channel.get() == b"x" and channel.get() == b"y"
