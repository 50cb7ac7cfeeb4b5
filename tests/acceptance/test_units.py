"""The systemd units of `pslurm install-units`: written with this installation's psctld and psd, pass
`systemd-analyze verify` (offline: no running systemd needed), keep the controller hardened and the agent
able to do what it must for its jobs, and never write over a unit pslurm did not write."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import cli

BIN = Path(sys.executable).parent


def analyze() -> str:
    found = shutil.which("systemd-analyze")
    if found is None:
        if os.environ.get("CI"):
            pytest.fail("systemd-analyze is missing: .ci/run installs systemd")
        pytest.skip("no systemd-analyze here (apt-get install systemd)")
    return found


def test_the_units_are_written_for_this_installation_and_verify(tmp_path: Path) -> None:
    conf = tmp_path / "etc" / "pslurm.conf"
    conf.parent.mkdir()
    conf.write_text("SlurmctldHost=localhost\nStateSaveLocation=/srv/pslurm/state\n")
    units = tmp_path / "units"
    done = cli("pslurm", "install-units", "--unit-dir", str(units), "--conf", str(conf), check=True)
    assert done.stdout.splitlines()[:2] == [f"pslurm install-units: wrote {units}/psctld.service",
                                            f"pslurm install-units: wrote {units}/psd.service"]
    psctld, psd = (units / "psctld.service").read_text(), (units / "psd.service").read_text()
    assert f"ExecStart={BIN}/psctld -f {conf} $PSCTLD_OPTIONS\n" in psctld
    assert f"ExecStart={BIN}/psd -f {conf} $PSD_OPTIONS\n" in psd
    assert f"ReadWritePaths=-/srv/pslurm/state -{conf.parent}\n" in psctld  # its StateSaveLocation, its socket
    assert "Restart=on-failure" in psctld and "Restart=on-failure" in psd
    # the agent's jobs run in its mount namespace, as their users: nothing that would reach them
    for setting in ("NoNewPrivileges", "ProtectHome", "PrivateTmp", "ProtectSystem", "PrivateDevices"):
        assert f"\n{setting}=" in psctld and f"\n{setting}=" not in psd, setting
    assert "\nDelegate=yes\n" in psd and "\nKillMode=process\n" in psd
    verify = subprocess.run([analyze(), "verify", str(units / "psctld.service"), str(units / "psd.service")],
                            capture_output=True, text=True)
    assert (verify.returncode, verify.stdout + verify.stderr) == (0, ""), verify


def test_a_unit_pslurm_did_not_write_is_left_alone(tmp_path: Path) -> None:
    (tmp_path / "psd.service").write_text("[Service]\nExecStart=/usr/sbin/slurmd\n")
    refused = cli("pslurm", "install-units", "--unit-dir", str(tmp_path), "--only", "psd")
    assert refused.returncode == 1 and refused.stderr == f"pslurm install-units: error: {tmp_path}/psd.service " \
                                                         "exists and is not pslurm's: --force writes over it\n"
    assert (tmp_path / "psd.service").read_text().endswith("slurmd\n")
    cli("pslurm", "install-units", "--unit-dir", str(tmp_path), "--only", "psd", "--force", check=True)
    cli("pslurm", "install-units", "--unit-dir", str(tmp_path), "--only", "psd", check=True)  # ours now: rewritten
    assert not (tmp_path / "psctld.service").exists()
    bad = cli("pslurm", "install-units", "--unit-dir", str(tmp_path), "--only", "slurmd")
    assert bad.returncode == 1 and bad.stderr == "pslurm install-units: error: --only slurmd: expected psctld or psd\n"


def test_a_broken_unit_fails_verification(tmp_path: Path) -> None:
    cli("pslurm", "install-units", "--unit-dir", str(tmp_path), "--only", "psd", check=True)
    unit = tmp_path / "psd.service"
    unit.write_text(unit.read_text().replace(f"{BIN}/psd", "/nonexistent/psd"))
    verify = subprocess.run([analyze(), "verify", str(unit)], capture_output=True, text=True)
    assert verify.returncode != 0 and "/nonexistent/psd is not executable" in verify.stderr
