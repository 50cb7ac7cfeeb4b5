"""Cluster configuration in slurm.conf / gres.conf / cgroup.conf syntax, and where to find it: the
records (:mod:`pslurm.core.confmodel`), the parsers (:mod:`pslurm.core.confparse`), the scheduling keys
(:func:`scheduler_config`) and the files' loaders, in one place to import them from."""

from __future__ import annotations

import os
from dataclasses import replace

# ConfigError and where the file is are the client's too (pslurm.core.clientconf: no dataclasses)
from pslurm.core.clientconf import ConfigError, default_state_dir, find_config_path
from pslurm.core.confmodel import (
    AccountConfig,
    CgroupConfig,
    ClusterConfig,
    GresConfLine,
    NodeConfig,
    PartitionConfig,
    SchedulerConfig,
)


def _time_or_minutes(path: str, key: str, value: str) -> int:
    from pslurm.core.timefmt import parse_time_limit

    try:
        found = parse_time_limit(value)
    except ValueError as exc:
        raise ConfigError(f"{path}: {key}: {exc}") from None
    return 0 if found is None else found


def scheduler_config(cfg: ClusterConfig) -> SchedulerConfig:
    """The scheduling keys of ``cfg.extra`` (kept there so the file round-trips). Raises ConfigError."""
    kv = {k.lower(): v for k, v in cfg.extra.items()}
    path = cfg.path
    values: dict[str, object] = {}

    def whole(key: str) -> int:
        text = kv[key]
        if not text.isdigit():
            raise ConfigError(f"{path}: {key}={text}: expected a whole number")
        return int(text)

    for key, attr in (("priorityweightage", "weight_age"), ("priorityweightfairshare", "weight_fairshare"),
                      ("priorityweightjobsize", "weight_jobsize"), ("priorityweightpartition", "weight_partition"),
                      ("priorityweightqos", "weight_qos"), ("maxjobcount", "max_job_count"),
                      ("maxarraysize", "max_array_size"), ("maxsubmitjobsperuser", "max_submit_jobs_per_user"),
                      ("maxjobsperuser", "max_jobs_per_user")):
        if key in kv:
            values[attr] = whole(key)
    for key, attr in (("prioritymaxage", "max_age"), ("prioritydecayhalflife", "decay_half_life")):
        if key in kv:
            values[attr] = _time_or_minutes(path, key, kv[key])
    for key, attr in (("priorityfavorsmall", "favor_small"), ("jobrequeue", "job_requeue")):
        if key in kv:
            values[attr] = kv[key].lower() in ("yes", "true", "1")
    if "enforcepartlimits" in kv:
        values["enforce_part_limits"] = kv["enforcepartlimits"].upper() not in ("NO", "0", "FALSE")
    if "tresbillingweights" in kv:
        weights = []
        for item in filter(None, kv["tresbillingweights"].split(",")):
            name, eq, num = item.partition("=")
            unit = 1.0
            if num[-1:].upper() in ("K", "M", "G", "T"):  # Mem=0.25G: per GB
                unit = {"K": 1 / 1024**2, "M": 1 / 1024, "G": 1.0, "T": 1024.0}[num[-1].upper()]
                num = num[:-1]
            try:
                weights.append((name.lower(), float(num) * (unit if name.lower() == "mem" else 1.0)))
            except ValueError:
                raise ConfigError(f"{path}: TRESBillingWeights: bad weight '{item}'") from None
            if not eq:
                raise ConfigError(f"{path}: TRESBillingWeights: expected NAME=WEIGHT, got '{item}'")
        values["billing_weights"] = tuple(weights)
    if "maxtresperuser" in kv:
        for item in filter(None, kv["maxtresperuser"].split(",")):
            name, _, num = item.partition("=")
            if not num.isdigit() or name.lower() not in ("gres/gpu", "cpu"):
                raise ConfigError(f"{path}: MaxTRESPerUser: expected gres/gpu=N or cpu=N, got '{item}'")
            values["max_gpus_per_user" if name.lower() == "gres/gpu" else "max_cpus_per_user"] = int(num)
    for item in filter(None, kv.get("schedulerparameters", "").split(",")):
        name, _, num = item.partition("=")
        if name.lower() == "bf_max_job_test":
            if not num.isdigit():
                raise ConfigError(f"{path}: SchedulerParameters: bf_max_job_test={num}: expected a number")
            values["bf_max_job_test"] = int(num)
        elif name.lower() == "bf_interval":  # Slurm's range: 1 to 10800 (3 h), or -1 (no backfill passes)
            if not (num.isdigit() and 1 <= int(num) <= 10800) and num != "-1":
                raise ConfigError(f"{path}: SchedulerParameters: bf_interval={num}: expected 1 to 10800, or -1")
            values["bf_interval"] = int(num)
    if "gpumemautodefault" in kv:
        from pslurm.core.jobdesc import parse_mem

        try:
            values["gpu_mem_auto_default"] = parse_mem(kv["gpumemautodefault"])
        except ValueError:
            raise ConfigError(f"{path}: GpuMemAutoDefault={kv['gpumemautodefault']}: expected a size (8G)") from None
    if "gpumemautomargin" in kv:
        values["gpu_mem_auto_margin"] = whole("gpumemautomargin")
    return SchedulerConfig(**values)  # type: ignore[arg-type]


def _read(path: str) -> str | None:
    """The file's text; None when it does not exist."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read: {getattr(exc, 'strerror', None) or exc}") from None


def load_cluster_config(path: str) -> ClusterConfig:
    """Read and parse pslurm.conf; with neither DatabaseURL nor DatabaseURLFile the database is
    ``sqlite:///<state_dir>/pslurm.db``."""
    text = _read(path)
    if text is None:
        raise ConfigError(f"{path}: cannot read: No such file or directory")
    cfg = parse_slurm_conf(text, path)
    if cfg.database_url and cfg.database_url_file:
        raise ConfigError(f"{path}: DatabaseURL and DatabaseURLFile are both set: keep one")
    if not cfg.database_url and not cfg.database_url_file:
        cfg = replace(cfg, database_url=f"sqlite:///{cfg.state_dir}/pslurm.db")
    return cfg


def load_gres_conf(conf_path: str) -> list[GresConfLine]:
    """gres.conf from the directory of pslurm.conf at ``conf_path``; [] when there is none."""
    path = os.path.join(os.path.dirname(conf_path), "gres.conf")
    text = _read(path)
    return [] if text is None else parse_gres_conf(text, path)


def load_cgroup_conf(conf_path: str) -> CgroupConfig:
    """cgroup.conf from the directory of pslurm.conf at ``conf_path``; defaults when there is none."""
    path = os.path.join(os.path.dirname(conf_path), "cgroup.conf")
    text = _read(path)
    return CgroupConfig() if text is None else parse_cgroup_conf(text, path)


# The records live in confmodel and the parsers in confparse (which import neither this module nor
# each other's importers): importing them here keeps one place to import the configuration from.
from pslurm.core.confparse import (  # noqa: E402
    gres_lines_for_node,
    parse_cgroup_conf,
    parse_gres_conf,
    parse_slurm_conf,
    render_slurm_conf,
)

__all__ = [
    "AccountConfig", "CgroupConfig", "ClusterConfig", "ConfigError", "GresConfLine", "NodeConfig", "PartitionConfig",
    "SchedulerConfig", "default_state_dir", "find_config_path", "gres_lines_for_node", "load_cgroup_conf",
    "load_cluster_config", "load_gres_conf", "parse_cgroup_conf", "parse_gres_conf", "parse_slurm_conf",
    "render_slurm_conf", "scheduler_config",
]
