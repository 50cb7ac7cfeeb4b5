"""Credentials, the cluster key, and the credential socket."""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pslurm.auth.credential import TTL, AuthError, Identity, create_key, load_key, sign, verify
from pslurm.auth.transport import Credentials, CredentialService, ask_credential_socket
from tests.conftest import ask_credential_as

KEY = b"k" * 64


@given(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1), st.floats(0, 4e9))
def test_a_signed_credential_verifies_as_whoever_it_was_made_for(uid, gid, now):
    assert verify(KEY, sign(KEY, Identity(uid, gid), now), now + TTL - 1) == Identity(uid, gid)


def test_forged_altered_expired_and_malformed_credentials_are_refused():
    good = sign(KEY, Identity(1000, 1000), 100.0)
    with pytest.raises(AuthError, match="not signed with this cluster's key"):
        verify(b"other" * 10, good, 100.0)
    with pytest.raises(AuthError, match="not signed"):
        verify(KEY, good.replace("p1.1000.", "p1.0.", 1), 100.0)  # claiming root
    with pytest.raises(AuthError, match="expired"):
        verify(KEY, good, 100.0 + TTL + 1)
    with pytest.raises(AuthError, match="future"):
        verify(KEY, sign(KEY, Identity(1, 1), 100.0 + 3 * TTL), 100.0)
    for junk in ("", "p1", "p2.1.1.500.ab.cd", "p1.x.1.500.ab.cd", "a.b.c"):
        with pytest.raises(AuthError, match="malformed"):
            verify(KEY, junk, 100.0)


def test_a_key_is_made_once_readable_by_its_owner_only(tmp_path):
    path = str(tmp_path / "pslurm.key")
    assert create_key(path) and not create_key(path)  # an existing key is never replaced
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert len(load_key(path)) == 64
    with pytest.raises(AuthError, match=r"cannot read the cluster key .*missing.key: No such file"):
        load_key(str(tmp_path / "missing.key"))
    (tmp_path / "short.key").write_text("abc\n")
    with pytest.raises(AuthError, match="too short"):
        load_key(str(tmp_path / "short.key"))


def test_a_client_signs_its_own_when_it_can_read_the_key_and_renews_it(tmp_path):
    create_key(str(tmp_path / "pslurm.key"))
    now = [1000.0]
    creds = Credentials(str(tmp_path / "pslurm.key"), str(tmp_path / "none.sock"), clock=lambda: now[0])
    first = creds.metadata()
    assert verify(load_key(str(tmp_path / "pslurm.key")), first[0][1], now[0]) == Identity(os.getuid(), os.getgid())
    assert creds.metadata() == first  # reused while fresh
    now[0] += TTL / 2 + 1
    assert creds.metadata() != first  # renewed well before it expires


def test_without_key_or_socket_the_error_names_both(tmp_path):
    creds = Credentials(str(tmp_path / "pslurm.key"), str(tmp_path / "pslurm.sock"))
    with pytest.raises(AuthError) as err:
        creds.metadata()
    assert str(err.value) == (f"cannot read the cluster key {tmp_path}/pslurm.key: No such file or directory, "
                              f"and no credential service at {tmp_path}/pslurm.sock: No such file or directory")


@pytest.mark.skipif(os.geteuid() != 0, reason="asking as another user needs root to become one")
def test_the_credential_socket_signs_for_whoever_the_kernel_says_connected():
    where = tempfile.mkdtemp(prefix="pslurm-auth-")  # under /tmp: a directory other users can reach
    os.chmod(where, 0o755)
    path = os.path.join(where, "pslurm.sock")
    service = CredentialService(path, KEY)
    service.start()
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o666
        assert verify(KEY, ask_credential_socket(path), time.time()) == Identity(0, os.getgid())
        assert verify(KEY, ask_credential_as(65534, 65534, path), time.time()) == Identity(65534, 65534)
    finally:
        service.close()
    try:
        assert not Path(path).exists()
        with pytest.raises(AuthError, match="no credential service"):
            ask_credential_socket(path)
    finally:
        shutil.rmtree(where)
