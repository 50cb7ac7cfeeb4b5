"""pslurm install-units: systemd units for psctld and psd, Slurm's slurmctld.service and slurmd.service as
the model (ordering after the network, restart on failure, limits; hardening for the controller, none
that would reach the jobs for the agent).

The units are shipped in the package (``pslurm/templates/systemd``) and written with this installation's
console scripts (``ExecStart=`` the absolute path of its psctld and psd) and the configuration given;
StateSaveLocation and the configuration's directory are read from it where it exists, for the
controller's ``ReadWritePaths=``. A unit file that is there is left alone unless it is pslurm's own or
``--force`` is given. Then: ``systemctl daemon-reload`` and ``systemctl enable --now psctld`` (on the
controllers' hosts) or ``psd`` (on the nodes).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from pslurm.cli.common import fail

PROG = "pslurm install-units"
UNITS = ("psctld", "psd")
MARKER = "pslurm install-units"  # in the head of every unit written: it may be written over
DEFAULT_STATE = "/var/spool/pslurm"


def render(unit: str, conf: Path, bin_dir: Path) -> str:
    """The text of ``unit``.service for the configuration ``conf`` and the console scripts in ``bin_dir``."""
    import jinja2

    state = DEFAULT_STATE
    if conf.exists():
        from pslurm.core.config import ConfigError, load_cluster_config

        try:
            state = load_cluster_config(str(conf)).state_dir
        except ConfigError as exc:
            fail(PROG, str(exc))
    env = jinja2.Environment(loader=jinja2.PackageLoader("pslurm", "templates/systemd"),
                             undefined=jinja2.StrictUndefined, keep_trailing_newline=True, autoescape=False)
    return env.get_template(f"{unit}.service.j2").render(conf=str(conf), conf_dir=str(conf.parent),
                                                         state_dir=state, bin_dir=str(bin_dir))


def install_units(
    unit_dir: Annotated[Path, typer.Option("--unit-dir", help="where systemd reads units")] = Path(
        "/etc/systemd/system"),
    conf: Annotated[Path, typer.Option("--conf", "-f", help="the cluster's pslurm.conf on this host")] = Path(
        "/etc/pslurm/pslurm.conf"),
    only: Annotated[str, typer.Option("--only", help="psctld or psd (default: both)")] = "",
    force: Annotated[bool, typer.Option("--force", help="write over unit files pslurm did not write")] = False,
) -> None:
    """Write systemd units for psctld and psd (this installation's), as Slurm's slurmctld/slurmd.service."""
    bin_dir = Path(sys.executable).parent
    wanted = UNITS if not only else tuple(u for u in UNITS if u == only)
    if not wanted:
        fail(PROG, f"--only {only}: expected psctld or psd")
    missing = [u for u in wanted if not (bin_dir / u).exists()]
    if missing:
        fail(PROG, f"{', '.join(missing)} not found in {bin_dir}: install pslurm (pip install pslurm) first")
    conf = conf.absolute()
    try:
        unit_dir.mkdir(parents=True, exist_ok=True)
        for unit in wanted:
            path = unit_dir / f"{unit}.service"
            if path.exists() and not force and MARKER not in path.read_text(errors="replace")[:200]:
                fail(PROG, f"{path} exists and is not pslurm's: --force writes over it")
            tmp = path.with_suffix(".service.tmp")
            tmp.write_text(render(unit, conf, bin_dir))
            os.chmod(tmp, 0o644)
            tmp.replace(path)
            print(f"{PROG}: wrote {path}")
    except OSError as exc:
        fail(PROG, f"cannot write to {unit_dir}: {exc.strerror}")
    print(f"{PROG}: then: systemctl daemon-reload; systemctl enable --now "
          f"{' '.join(wanted) if len(wanted) == 1 else 'psctld (controllers) or psd (nodes)'}")
