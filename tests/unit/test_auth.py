"""Credentials, the cluster key, and the credential socket."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import tempfile
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pslurm.auth.credential import (
    API,
    CONTROLLER,
    TTL,
    AuthError,
    Identity,
    create_key,
    load_key,
    node_audience,
    sign,
    verify,
)
from pslurm.auth.ratelimit import TokenBuckets
from pslurm.auth.replay import ReplayCache
from pslurm.auth.secretfiles import (
    check_cluster_secrets,
    check_private,
    exposure,
    has_password,
    read_database_url,
    write_private,
)
from pslurm.auth.transport import METADATA_KEY, Authenticator, Credentials, CredentialService, ask_credential_socket
from pslurm.core.config import ConfigError, load_cluster_config
from tests.conftest import ask_credential_as, run_as

NOBODY = 65534

KEY = b"k" * 64


@given(st.integers(0, 2**31 - 1), st.integers(0, 2**31 - 1), st.floats(0, 4e9))
def test_a_signed_credential_verifies_as_whoever_it_was_made_for(uid, gid, now):
    assert verify(KEY, sign(KEY, Identity(uid, gid), now), now + TTL - 1) == Identity(uid, gid)


def test_forged_altered_expired_and_malformed_credentials_are_refused():
    good = sign(KEY, Identity(1000, 1000), 100.0)
    with pytest.raises(AuthError, match="not signed with this cluster's key"):
        verify(b"other" * 10, good, 100.0)
    with pytest.raises(AuthError, match="not signed"):
        verify(KEY, good.replace("p2.api.1000.", "p2.api.0.", 1), 100.0)  # claiming root
    with pytest.raises(AuthError, match="expired"):
        verify(KEY, good, 100.0 + TTL + 1)
    with pytest.raises(AuthError, match="future"):
        verify(KEY, sign(KEY, Identity(1, 1), 100.0 + 3 * TTL), 100.0)
    for junk in ("", "p1", "p1.1.1.500.ab.cd", "p2.api.x.1.500.ab.cd", "a.b.c", "p2.api.1.1.500.ab",
                 "p2.api." + "9" * 5000 + ".1.500.ab.cd"):
        with pytest.raises(AuthError, match="malformed"):
            verify(KEY, junk, 100.0)


def test_a_credential_is_good_only_for_the_server_it_was_made_for():
    for_c000 = sign(KEY, Identity(0, 0), 100.0, audience=node_audience("c000"))
    assert verify(KEY, for_c000, 100.0, node_audience("c000")) == Identity(0, 0)
    for elsewhere in (node_audience("c001"), CONTROLLER, API):
        with pytest.raises(AuthError, match="credential made for node-c000, not for"):
            verify(KEY, for_c000, 100.0, elsewhere)
    with pytest.raises(AuthError, match="made for api"):  # a user's (the socket's kind) at an agent
        ReplayCache().verify_once(KEY, sign(KEY, Identity(1000, 1000), 100.0), 100.0, node_audience("c000"))
    assert node_audience("gpu.node 1") != node_audience("gpu_node_1") and "." not in node_audience("gpu.node 1")


def test_one_uid_cannot_fill_the_replay_cache_for_the_others():
    cache = ReplayCache(max_entries=100, max_per_uid=10)
    for _ in range(10):
        cache.verify_once(KEY, sign(KEY, Identity(1000, 1000), 100.0), 100.0)
    with pytest.raises(AuthError, match="too many credentials"):
        cache.verify_once(KEY, sign(KEY, Identity(1000, 1000), 100.0), 100.0)
    assert cache.verify_once(KEY, sign(KEY, Identity(1001, 1001), 100.0), 100.0) == Identity(1001, 1001)
    cache.verify_once(KEY, sign(KEY, Identity(1000, 1000), 100.0 + TTL + 1), 100.0 + TTL + 1)  # expiry frees them


def test_a_daemons_only_server_refuses_a_users_good_credential_without_spending_it():
    auth = Authenticator(KEY, audience=CONTROLLER, only=frozenset({0}))
    users = [((METADATA_KEY, sign(KEY, Identity(1000, 1000), time.time(), audience=CONTROLLER)),)
             for _ in range(50)]
    for metadata in users:
        with pytest.raises(AuthError, match="daemons only"):
            auth.admit(metadata)
    assert len(auth.replay) == 0
    assert auth.admit(((METADATA_KEY, sign(KEY, Identity(0, 0), time.time(), audience=CONTROLLER)),)).uid == 0


def test_token_buckets_refuse_past_the_burst_and_refill_at_the_rate():
    now = [0.0]
    buckets = TokenBuckets(rate=10, burst=20, clock=lambda: now[0])
    assert sum(buckets.take(1000) for _ in range(100)) == 20
    assert buckets.take(1001)  # another uid has its own
    now[0] = 1.0
    assert sum(buckets.take(1000) for _ in range(100)) == 10


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


def test_a_client_signs_a_fresh_credential_for_every_call_reading_the_key_once(tmp_path):
    create_key(str(tmp_path / "pslurm.key"))
    key = load_key(str(tmp_path / "pslurm.key"))
    creds = Credentials(str(tmp_path / "pslurm.key"), str(tmp_path / "none.sock"), clock=lambda: 1000.0)
    first = creds.metadata()
    assert verify(key, first[0][1], 1000.0) == Identity(os.getuid(), os.getgid())
    os.unlink(tmp_path / "pslurm.key")  # read once: the process keeps it
    second = creds.metadata()
    assert second != first  # a server takes each credential once: every call gets its own
    cache = ReplayCache()
    assert cache.verify_once(key, first[0][1], 1000.0) == cache.verify_once(key, second[0][1], 1000.0)


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


# -- single use ------------------------------------------------------------------------------------


def test_a_credential_is_accepted_once_and_forgotten_when_it_expires():
    cache = ReplayCache()
    cred = sign(KEY, Identity(1000, 1000), 100.0)
    assert cache.verify_once(KEY, cred, 100.0) == Identity(1000, 1000)
    with pytest.raises(AuthError, match="already used"):
        cache.verify_once(KEY, cred, 101.0)  # a captured credential, replayed
    assert verify(KEY, cred, 101.0) == Identity(1000, 1000)  # a handler's second look does not spend it
    with pytest.raises(AuthError, match="expired"):
        cache.verify_once(KEY, cred, 100.0 + TTL + 1)
    for i in range(100):  # a later credential makes room: every expired nonce is gone
        cache.verify_once(KEY, sign(KEY, Identity(i, i), 100.0 + TTL + 1), 100.0 + TTL + 1)
    assert len(cache) == 100
    # what is refused before its signature checks out takes no room
    for junk in ("", "p1.0.0.9999999999.00.deadbeef", cred.replace(".1000.", ".0.", 1)):
        with pytest.raises(AuthError):
            cache.verify_once(KEY, junk, 100.0 + TTL + 1)
    assert len(cache) == 100


def test_the_replay_cache_is_bounded_and_refuses_rather_than_forgets():
    cache = ReplayCache(max_entries=3)
    creds = [sign(KEY, Identity(1, 1), 100.0) for _ in range(4)]
    for cred in creds[:3]:
        cache.verify_once(KEY, cred, 100.0)
    with pytest.raises(AuthError, match="too many credentials"):
        cache.verify_once(KEY, creds[3], 100.0)
    with pytest.raises(AuthError, match="already used"):
        cache.verify_once(KEY, creds[0], 100.0)  # still remembered
    assert len(cache) == 3
    cache.verify_once(KEY, sign(KEY, Identity(1, 1), 100.0 + TTL + 1), 100.0 + TTL + 1)  # expiry frees them
    assert len(cache) == 1


@pytest.mark.skipif(os.geteuid() != 0, reason="serving the credential socket and asking as another user need root")
def test_a_user_without_the_key_asks_the_socket_for_every_call():
    where = tempfile.mkdtemp(prefix="pslurm-auth-")
    os.chmod(where, 0o755)
    path = os.path.join(where, "pslurm.sock")
    service = CredentialService(path, KEY)
    service.start()
    try:
        creds = Credentials(os.path.join(where, "no.key"), path)
        metadata = [creds.metadata()[0][1] for _ in range(200)]
        assert len(set(metadata)) == 200
        cache = ReplayCache()
        assert {cache.verify_once(KEY, m, time.time()) for m in metadata} == {Identity(0, os.getgid())}
        started = time.perf_counter()
        for _ in range(200):
            creds.metadata()
        per_call = (time.perf_counter() - started) / 200
        assert per_call < 0.01, f"{per_call * 1000:.2f} ms per credential"  # well under a millisecond here
    finally:
        service.close()
        shutil.rmtree(where)


@pytest.mark.skipif(os.geteuid() != 0, reason="serving the credential socket and asking as another user need root")
def test_the_socket_gives_one_user_a_bounded_rate_and_the_others_theirs():
    where = tempfile.mkdtemp(prefix="pslurm-auth-")
    os.chmod(where, 0o755)
    path = os.path.join(where, "pslurm.sock")
    service = CredentialService(path, KEY, rate=50)
    service.start()

    def lines(count: int) -> str:
        out = []
        for _ in range(count):
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.connect(path)
                out.append(sock.makefile("rb").readline().decode().strip())
        return ",".join("error" if line.startswith("error:") else "ok" for line in out)

    try:
        said = run_as(NOBODY, NOBODY, lambda: lines(300)).split(",")
        assert said.count("ok") >= 100 and said.count("error") > 0  # the burst, then refused past the rate
        assert run_as(NOBODY, NOBODY, lambda: ask_credential_socket(path)).startswith("p2.api.65534.")  # retried
        assert run_as(1, 1, lambda: lines(20)) == ",".join(["ok"] * 20)  # daemon (uid 1): its own bucket
    finally:
        service.close()
        shutil.rmtree(where)


# -- secrets in files ------------------------------------------------------------------------------


@pytest.fixture
def open_dir():
    """A directory every user can reach (tmp_path is 0700: nothing in it is exposed)."""
    where = tempfile.mkdtemp(prefix="pslurm-secrets-")
    os.chmod(where, 0o755)
    try:
        yield Path(where)
    finally:
        shutil.rmtree(where)


@pytest.fixture
def born(monkeypatch) -> list[int]:
    """The modes files are created with (os.open with O_CREAT), as they are created."""
    modes: list[int] = []
    real_open = os.open

    def watching(path, flags, mode=0o777, *args, **kw):  # type: ignore[no-untyped-def]
        fd = real_open(path, flags, mode, *args, **kw)
        if flags & os.O_CREAT:
            modes.append(stat.S_IMODE(os.fstat(fd).st_mode))
        return fd

    monkeypatch.setattr(os, "open", watching)
    return modes


def test_a_secret_is_private_from_its_first_byte_and_an_old_reader_does_not_see_it(open_dir, born):
    secret = open_dir / "database.url"
    secret.write_text("old\n")
    secret.chmod(0o644)
    reader = open(secret)  # opened while it was readable: it keeps the old file, not the new text  # noqa: SIM115
    old_umask = os.umask(0)
    try:
        write_private(str(secret), "postgresql://u:pw@db/x\n")
    finally:
        os.umask(old_umask)
    assert born == [0o600] and stat.S_IMODE(secret.stat().st_mode) == 0o600
    assert reader.read() == "old\n" and secret.read_text() == "postgresql://u:pw@db/x\n"
    reader.close()
    assert sorted(p.name for p in open_dir.iterdir()) == ["database.url"]  # no temporary left


def test_lxc_copies_the_key_private_from_its_first_byte(open_dir, born):
    from types import SimpleNamespace

    from pslurm.lxc import cluster

    nodes = {"c000": open_dir / "c000", "c001": open_dir / "c001"}
    for where in nodes.values():
        where.mkdir()
    plan = SimpleNamespace(state_dir=open_dir, nodes=list(nodes), node_dir=nodes.__getitem__)
    cluster._install_key(plan)  # type: ignore[arg-type]
    assert born == [0o600, 0o600, 0o600]  # the key and both copies
    key = (open_dir / "pslurm.key").read_text()
    assert all((where / "pslurm.key").read_text() == key for where in nodes.values())


def test_a_secret_is_exposed_only_where_others_can_reach_and_read_it(open_dir, tmp_path):
    secret = open_dir / "secret"
    write_private(str(secret), "x\n")
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and exposure(str(secret)) is None
    secret.chmod(0o644)
    assert exposure(str(secret)) == "mode 0644"
    secret.chmod(0o640)
    assert exposure(str(secret)) == "mode 0640"  # the file's group may read it too
    write_private(str(secret), "y\n")  # rewriting makes it private again
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600 and secret.read_text() == "y\n"
    hidden = tmp_path / "secret"  # pytest's tmp_path is 0700: nobody else gets in
    hidden.write_text("x")
    hidden.chmod(0o644)
    assert exposure(str(hidden)) is None and exposure(str(open_dir / "missing")) is None
    key = open_dir / "key"
    key.write_text("k" * 64)
    key.chmod(0o644)
    with pytest.raises(AuthError) as err:
        check_private(str(key), "the cluster key")
    assert str(err.value) == f"the cluster key {key} can be read by other users (mode 0644): chmod 600 {key}"


def test_which_database_urls_hold_a_password():
    assert has_password("postgresql+psycopg://pslurm:secret@db/pslurm")
    assert has_password("postgresql://db/pslurm?password=secret&sslmode=require")
    assert not has_password("postgresql+psycopg://pslurm@db/pslurm")  # peer or .pgpass authentication
    assert not has_password("sqlite:////var/spool/pslurm/pslurm.db")
    assert not has_password("") and not has_password("http://[bad")


def test_psctld_secrets_check(open_dir):
    conf = open_dir / "pslurm.conf"
    url = "postgresql+psycopg://pslurm:secret@127.0.0.1/pslurm"
    create_key(str(open_dir / "pslurm.key"))
    conf.write_text(f"DatabaseURL={url}\n")
    conf.chmod(0o644)
    with pytest.raises(AuthError, match=r"pslurm.conf can be read by other users \(mode 0644\) and its DatabaseURL "
                                        r"holds a password: .*DatabaseURLFile="):
        check_cluster_secrets(load_cluster_config(str(conf)))
    conf.chmod(0o600)
    check_cluster_secrets(load_cluster_config(str(conf)))  # a private pslurm.conf may hold it
    # the URL in its own file, pslurm.conf readable by all
    url_file = open_dir / "database.url"
    write_private(str(url_file), url + "\n")
    conf.write_text(f"DatabaseURLFile={url_file}\n")
    conf.chmod(0o644)
    config = load_cluster_config(str(conf))
    assert config.database_url == "" and config.database_url_file == str(url_file)
    check_cluster_secrets(config)
    assert read_database_url(str(url_file)) == url
    url_file.chmod(0o644)
    with pytest.raises(AuthError, match=r"^DatabaseURLFile .*database.url can be read by other users \(mode 0644\)"):
        check_cluster_secrets(config)
    with pytest.raises(AuthError, match="can be read by other users"):
        read_database_url(str(url_file))
    write_private(str(url_file), "")
    with pytest.raises(AuthError, match="must hold one line"):
        read_database_url(str(url_file))
    (open_dir / "pslurm.key").chmod(0o644)
    with pytest.raises(AuthError, match=r"^the cluster key .* can be read by other users"):
        check_cluster_secrets(config)
    conf.write_text(f"DatabaseURL={url}\nDatabaseURLFile={url_file}\n")
    with pytest.raises(ConfigError, match="DatabaseURL and DatabaseURLFile are both set"):
        load_cluster_config(str(conf))


@settings(max_examples=200)
@given(st.binary(min_size=0, max_size=200), st.text(max_size=300))
def test_the_mac_is_hmac_sha256_without_hashlib(key: bytes, body: str) -> None:
    """The credential's MAC, over CPython's own SHA-256 (no OpenSSL at a command's start), is RFC 2104's
    HMAC-SHA256 as the standard library makes it, short and long keys alike."""
    import hashlib
    import hmac

    from pslurm.auth.credential import _mac

    assert _mac(key, body) == hmac.new(key, body.encode(), hashlib.sha256).hexdigest()
