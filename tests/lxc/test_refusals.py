"""``pslurm lxc`` refuses clearly (one line, non-zero, nothing made) where the host cannot run it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

from pslurm.cli import lxc_cmd
from pslurm.lxc import host


def run_up(tmp_path: Path) -> tuple[int, str]:
    result = CliRunner().invoke(lxc_cmd.make_app(), ["up", "--fake-gpus", "--state-dir", str(tmp_path / "c")])
    return result.exit_code, result.output  # stdout and stderr together


def test_not_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    code, out = run_up(tmp_path)
    assert code == 1
    assert out.strip() == "pslurm lxc: error: LXC containers with device cgroups need root (running as uid 1000)"
    assert not (tmp_path / "c").exists()


def test_lxc_not_installed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(host.shutil, "which", lambda tool: None if tool == "lxc-start" else "/usr/bin/" + tool)
    code, out = run_up(tmp_path)
    assert code == 1 and "error: LXC is not installed: lxc-start not found" in out
    assert len(out.strip().splitlines()) == 1 and not (tmp_path / "c").exists()


def test_no_usable_cgroups(tmp_path: Path) -> None:
    with pytest.raises(host.HostError, match="no usable cgroups"):
        host.cgroup_version(tmp_path)
    (tmp_path / "devices").mkdir()
    (tmp_path / "devices" / "devices.allow").write_text("")
    assert host.cgroup_version(tmp_path) == 1
    (tmp_path / "cgroup.controllers").write_text("cpu memory\n")
    (tmp_path / "devices" / "devices.allow").unlink()
    assert host.cgroup_version(tmp_path) == 2


def test_bindings_missing_is_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    import importlib

    from pslurm.lxc import bindings

    real = importlib.import_module

    def no_lxc(name: str, package: str | None = None) -> object:
        if name == "lxc":
            raise ImportError("No module named 'lxc'")
        return real(name, package)

    monkeypatch.setattr(bindings.importlib, "import_module", no_lxc)
    with pytest.raises(bindings.BindingsMissing, match=r"apt-get install lxc python3-lxc"):
        bindings.load_lxc(str(tmp_path))
