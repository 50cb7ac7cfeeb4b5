"""What a client reads of pslurm.conf (pslurm.core.clientconf): the same values, and the same
errors for the keys it reads, as the daemons' full parser."""

from __future__ import annotations

import shlex
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pslurm.core.clientconf import ClientConf, ConfigError, _tokens, read_client_conf
from pslurm.core.config import load_cluster_config

CONF = """# a cluster
ClusterName=lab
SlurmctldHost='head(10.0.0.5)'   # the controller
SlurmctldHost=backup
SlurmctldPort=7817 RestPort=7820
AuthKey=/etc/pslurm/k \\
  AuthSocket="/run/pslurm sock"
NodeName=c[000-001] NodeAddr=10.0.0.9 Port=9000 CPUs=8 RealMemory=1000 Gres=gpu:2
PartitionName=gpu Nodes=ALL Default=YES RestPort=1
"""


@pytest.mark.parametrize("text", [CONF, "SlurmctldHost=localhost\n", "ClusterName=x\n"])
def test_the_client_reads_what_the_full_parser_reads(tmp_path: Path, text: str) -> None:
    path = tmp_path / "pslurm.conf"
    path.write_text(text)
    mine, full = read_client_conf(str(path)), load_cluster_config(str(path))
    for name in ("controller_addr", "controller_port", "rest_port", "auth_key_path", "auth_socket_path",
                 "controller_target", "cluster_name"):
        assert getattr(mine, name) == getattr(full, name), name


@pytest.mark.parametrize("line", ["RestPort=99999", "SlurmctldHost=a(b", "SlurmctldPort=x", "AuthKey='open",
                                  "SlurmctldHost=a\\"])
def test_a_malformed_client_key_is_the_same_error(tmp_path: Path, line: str) -> None:
    path = tmp_path / "pslurm.conf"
    path.write_text(f"ClusterName=x\n{line}\n")
    with pytest.raises(ConfigError) as full:
        load_cluster_config(str(path))
    with pytest.raises(ConfigError) as mine:
        read_client_conf(str(path))
    assert str(mine.value) == str(full.value)


@pytest.mark.parametrize("line", ["a=1 b=2", "a=1\tb=2 # c=3", "a=1#b", "  ", "x='y z' w=\"q\"", "a=\\#1 b=2",
                                  "NodeName=c[0-1] Gres=gpu:2"])
def test_the_tokenizer_splits_as_shlex(line: str) -> None:
    lexer = shlex.shlex(line, posix=True)
    lexer.whitespace_split, lexer.commenters = True, "#"
    assert _tokens(line, "p", 1) == list(lexer)


def test_defaults_sit_beside_the_file() -> None:
    conf = ClientConf("/srv/c/pslurm.conf")
    assert (conf.auth_key_path, conf.auth_socket_path) == ("/srv/c/pslurm.key", "/srv/c/pslurm.sock")
    assert (conf.controller_target, conf.rest_port) == ("127.0.0.1:6817", 6820)


@settings(max_examples=2000)
@given(st.text(alphabet=" \t'\"\\#ab=(.)é", max_size=40))
def test_quoted_words_split_as_shlex_splits_them(line: str) -> None:
    """pslurm.conf's words are shlex's (POSIX, comments), without shlex (it costs commands ``re``)."""
    import shlex

    from pslurm.core.clientconf import _split_quoted

    try:
        want = shlex.split(line, comments=True)
    except ValueError as exc:
        with pytest.raises(ValueError, match=str(exc)):
            _split_quoted(line)
        return
    assert _split_quoted(line) == want
