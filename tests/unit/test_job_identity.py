"""A job's user is its uid's name on the controller's host, never the client's word; an agent gives a
job the supplementary groups of its uid's own name on the node, or none for a uid the node does not
know (controller.admission.own_user, nodeagent.identity)."""

from __future__ import annotations

import os
import pwd

import pytest

from pslurm.auth.credential import Identity
from pslurm.controller.admission import own_user
from pslurm.controller.errors import PermissionDenied
from pslurm.core.jobspec import JobSpec
from pslurm.nodeagent.identity import supplementary_groups

OPERATORS = frozenset({0})
UNKNOWN = 4_000_123  # a uid no host here knows


def job(user: str, uid: int, gid: int) -> JobSpec:
    return JobSpec(name="j", user=user, uid=uid, gid=gid, workdir="/tmp", script="#!/bin/sh\n")


def test_the_name_comes_from_the_uid_whatever_the_client_says() -> None:
    nobody = pwd.getpwnam("nobody")
    sent = job("root", nobody.pw_uid, nobody.pw_gid)  # nobody claiming to be root by name
    assert own_user(sent, Identity(nobody.pw_uid, nobody.pw_gid), OPERATORS).user == "nobody"
    assert own_user(job("x", 0, 0), Identity(0, 0), OPERATORS).user == pwd.getpwuid(0).pw_name


def test_a_uid_the_controller_does_not_know_is_refused_unless_an_operator_vouches() -> None:
    with pytest.raises(PermissionDenied, match=f"Invalid user id: uid {UNKNOWN} has no name"):
        own_user(job("root", UNKNOWN, UNKNOWN), Identity(UNKNOWN, UNKNOWN), OPERATORS)
    assert own_user(job("alice", UNKNOWN, UNKNOWN), Identity(0, 0), OPERATORS).user == "alice"


def test_a_user_submits_only_for_their_own_uid_and_gid() -> None:
    with pytest.raises(PermissionDenied, match="the job is for uid 0 gid 0"):
        own_user(job("root", 0, 0), Identity(65534, 65534), OPERATORS)


def test_the_agent_takes_groups_from_the_uids_own_name_or_gives_none() -> None:
    assert supplementary_groups(0, 0) == os.getgrouplist(pwd.getpwuid(0).pw_name, 0)
    assert supplementary_groups(UNKNOWN, 1234) == [1234]  # not root's, not anybody's: its gid alone
