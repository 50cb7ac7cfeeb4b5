"""The files every host holds: the cluster key (0600: whoever reads it signs root's credential),
pslurm.conf (every user reads it, nobody else writes it, no password in it), DatabaseURLFile (0600,
on a controller's host)."""

from __future__ import annotations

import os
import stat

from pslurm.auth.secretfiles import exposure, has_password
from pslurm.core.config import ClusterConfig
from pslurm.doctor.report import Check, fail, ok, skip, warn


def check_key(config: ClusterConfig) -> Check:
    path = config.auth_key_path
    try:
        st = os.stat(path)
    except OSError as exc:
        return fail("key", f"no cluster key at {path} ({exc.strerror}): copy the controller's pslurm.key here, "
                           "mode 0600 (psctld makes it at its first start)")
    why = exposure(path)
    if why is not None:
        return fail("key", f"{path} can be read by other users ({why}): chmod 600 {path}")
    if not st.st_size:
        return fail("key", f"{path} is empty: copy the controller's pslurm.key here")
    return ok("key", f"{path}: mode {stat.S_IMODE(st.st_mode):04o}, readable by its owner only")


def check_config(config: ClusterConfig) -> Check:
    path = config.path
    mode = stat.S_IMODE(os.stat(path).st_mode)
    if mode & (stat.S_IWGRP | stat.S_IWOTH):
        return fail("config", f"{path} can be written by other users (mode {mode:04o}): chmod 644 {path}")
    if has_password(config.database_url) and exposure(path) is not None:
        return fail("config", f"{path} can be read by other users and its DatabaseURL holds a password: move the URL "
                              "to a 0600 file named by DatabaseURLFile=")
    if not mode & stat.S_IROTH:
        return warn("config", f"{path} (mode {mode:04o}) cannot be read by users: the commands need it: "
                              f"chmod 644 {path}")
    return ok("config", f"{path}: mode {mode:04o}, no secret in it")


def check_database_file(config: ClusterConfig, controller_host: bool) -> Check:
    path = config.database_url_file
    if not path:
        return skip("database-file", "no DatabaseURLFile= (the URL is in pslurm.conf, or SQLite)")
    if not os.path.exists(path):
        if controller_host:
            return fail("database-file", f"DatabaseURLFile {path} is missing on this controller's host: write the "
                                         "database URL in it, mode 0600")
        return skip("database-file", f"{path} is the controllers' (this host runs none)")
    why = exposure(path)
    if why is not None:
        return fail("database-file", f"{path} can be read by other users ({why}): chmod 600 {path}")
    return ok("database-file", f"{path}: readable by its owner only")
