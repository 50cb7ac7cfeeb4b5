"""Multifactor priority, as Slurm defines it, and the fair-share factor: pure functions, ``now`` passed in.

    priority = W_age * age + W_fairshare * fairshare + W_jobsize * jobsize
               + W_partition * partition + W_qos * qos - nice

each factor in [0, 1]: age = min(waited, PriorityMaxAge) / PriorityMaxAge; job size = the job's share
of the cluster's billable TRES (1 minus that with PriorityFavorSmall); partition = PriorityJobFactor /
the largest PriorityJobFactor; qos = 0 (pslurm has no QOS). An operator's ``Priority=`` replaces the
sum. Fair share is Slurm's classic formula over a two-level tree (accounts with their Fairshare=
shares, 1 each by default, then their users, equal shares): F = 2^(-U_eff / S), with usage =
TRESBillingWeights-weighted CPU- and GPU-seconds decayed with PriorityDecayHalfLife.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pslurm.core.assoc import ALL_USERS, ROOT, Account, Assoc, Associations
from pslurm.core.config import SchedulerConfig

DEFAULT_ACCOUNT = "(null)"


@dataclass(frozen=True)
class Factors:
    age: float
    fairshare: float
    jobsize: float
    partition: float
    qos: float
    nice: int


def billing_rate(weights: Iterable[tuple[str, float]], cpus: int, mem_mb: int, gpus: int) -> float:
    """Billable TRES per second of a job holding these (TRESBillingWeights: CPU, Mem per GB, GRES/gpu)."""
    rate = 0.0
    for name, weight in weights:
        if name == "cpu":
            rate += weight * cpus
        elif name == "mem":
            rate += weight * mem_mb / 1024
        elif name in ("gres/gpu", "gres/gpu:"):
            rate += weight * gpus
    return rate


def decay(value: float, age: float, half_life: float) -> float:
    """``value`` halved for every ``half_life`` seconds of ``age`` (no decay when half_life is 0)."""
    if half_life <= 0 or age <= 0:
        return value
    return value * 0.5 ** (age / half_life)


def run_usage(rate: float, start: float, end: float, now: float, half_life: float) -> float:
    """Billable usage of one run from ``start`` to ``end`` (or now), as seen at ``now``: each second's
    usage decays from its own time (integrated exactly)."""
    end = min(end, now)
    if end <= start:
        return 0.0
    if half_life <= 0:
        return rate * (end - start)
    import math

    k = math.log(2) / half_life
    # integral of rate * 2^(-(now - t)/h) dt from start to end
    return rate * (math.exp(-k * (now - end)) - math.exp(-k * (now - start))) / k


@dataclass(frozen=True)
class ShareRow:
    """One line of sshare: an account (``user`` "") or a user of it, in the fair-share tree."""

    account: str
    user: str
    raw_shares: int
    norm_shares: float  # S
    raw_usage: float  # decayed billable TRES-seconds
    effective_usage: float  # UE
    fairshare: float | None  # F (users only)
    parent: str = ""  # an account's parent account ("" under the root)
    depth: int = 1  # 1: directly under the root (sshare indents by it)
    assoc_id: int = 0


def fairshare_tree(usage: Mapping[tuple[str, str], float], users: Iterable[tuple[str, str]],
                   shares: Mapping[str, int] | None = None,
                   members: Mapping[str, Iterable[str]] | None = None) -> list[ShareRow]:
    """:func:`share_rows` over a two-level tree: the accounts of ``shares`` (their raw shares; 1 for
    one not named) under the root, each with the users ``members`` lists, all with one share."""
    accounts = {name: Account(name) for name in shares or {}}
    assocs = [Assoc(name, parent=ROOT, fairshare=value) for name, value in (shares or {}).items()]
    assocs += [Assoc(account, user) for account, names in (members or {}).items() for user in names
               if account in accounts]
    return share_rows(usage, users, Associations(accounts, {}, tuple(assocs)))


def share_rows(usage: Mapping[tuple[str, str], float], users: Iterable[tuple[str, str]],
               tree: Associations) -> list[ShareRow]:
    """Slurm's classic fair share (priority/multifactor with PriorityFlags=NO_FAIR_TREE) over the
    association tree: every account (depth first, as sshare lists them) then its users, for every
    association of ``tree`` and every (account, user) in ``usage`` (of an account the tree has, where it
    is enforced) and in ``users``.

        F = 2^(-UE / S)

    S, the normalised shares: an association's raw shares (Fairshare=, 1 by default) over those of
    its siblings (the accounts and users under the same account), times its parent's S. U, the
    normalised usage: the decayed billable usage under it over the whole cluster's. UE, the
    effective usage: an account under the root its own U; below, U + (UE_parent - U) * (its raw
    shares over its siblings'), so that a user's factor falls with their account's usage too. No
    usage at all is F = 1."""
    raw: dict[tuple[str, str], int] = {}  # (account, user or "") -> raw shares
    ids: dict[tuple[str, str], int] = {}
    kids: dict[str, list[tuple[str, str]]] = defaultdict(list)  # account -> its child accounts' and users' keys
    for a in tree.assocs:
        if a.partition or a.account == ROOT and not a.user or a.user == ALL_USERS:
            continue
        key = (a.account, a.user)
        raw[key], ids[key] = a.fairshare, a.id
        kids[a.account if a.user else tree.parent_of(a.account) or ROOT].append(key)
    seen = [k for k in usage if not tree.enforced or k[0] in tree.accounts]  # a deleted account's usage: not a row
    for account, user in [*seen, *users]:
        for key in ((account, ""), (account, user)):
            if key not in raw and key != (ROOT, ""):  # the root account is the tree's top, no row under itself
                raw[key] = 1
                kids[account if key[1] else (tree.parent_of(account) if account in tree.accounts else ROOT)
                     ].append(key)
    total = sum(usage.values())
    below: dict[str, float] = defaultdict(float)  # each account's usage, its sub-accounts' included
    for (account, _), value in usage.items():
        for name in tree.lineage(account) if account in tree.accounts else [account]:
            below[name] += value
    out: list[ShareRow] = []

    def walk(account: str, s_parent: float, ue_parent: float | None, depth: int) -> None:
        level = sum(raw[k] for k in kids[account]) or 1
        for key in sorted(kids[account], key=lambda k: not k[1]):  # users, then sub-accounts, as sshare lists
            name, user = key
            share = raw[key] / level
            s = s_parent * share
            used = usage.get(key, 0.0) if user else below[name]
            u = used / total if total > 0 else 0.0
            ue = u if ue_parent is None else u + (ue_parent - u) * share
            if user:
                out.append(ShareRow(name, user, raw[key], s, used, ue, 2.0 ** (-ue / s) if s > 0 else 0.0,
                                    account, depth, ids.get(key, 0)))
            else:
                out.append(ShareRow(name, "", raw[key], s, used, ue, None, "" if account == ROOT else account,
                                    depth, ids.get(key, 0)))
                walk(name, s, ue, depth + 1)

    walk(ROOT, 1.0, None, 1)
    return out


def fairshare_factors(usage: Mapping[tuple[str, str], float], users: Iterable[tuple[str, str]],
                      shares: Mapping[str, int] | None = None,
                      members: Mapping[str, Iterable[str]] | None = None) -> dict[tuple[str, str], float]:
    """The fair-share factor of each (account, user) of :func:`fairshare_tree`."""
    return user_factors(fairshare_tree(usage, users, shares, members))


def user_factors(rows: Iterable[ShareRow]) -> dict[tuple[str, str], float]:
    """(account, user) -> F, of the users' rows."""
    return {(r.account, r.user): r.fairshare for r in rows if r.fairshare is not None}


@dataclass(frozen=True)
class PriorityContext:
    """What every job's factors are computed against in one pass."""

    config: SchedulerConfig
    now: float
    fairshare: Mapping[tuple[str, str], float]
    cluster_billing: float  # billable TRES of the whole cluster (job size's denominator)
    partition_factor: Mapping[str, float]  # normalised PriorityJobFactor


def factors(ctx: PriorityContext, *, eligible_time: float | None, account: str, user: str, partition: str,
            cpus: int, mem_mb: int, gpus: int, nice: int) -> Factors:
    """A pending job's factors. Age counts from when it became eligible (Slurm's EligibleTime: not
    held, dependencies met), not from its submit: a job held for a week does not jump the queue."""
    cfg = ctx.config
    age = 0.0
    if cfg.max_age > 0 and eligible_time is not None:
        age = min(max(ctx.now - eligible_time, 0.0), cfg.max_age) / cfg.max_age
    size = 0.0
    if ctx.cluster_billing > 0:
        size = min(1.0, billing_rate(cfg.billing_weights, cpus, mem_mb, gpus) / ctx.cluster_billing)
    if cfg.favor_small:
        size = 1.0 - size
    return Factors(age=age, fairshare=ctx.fairshare.get((account or DEFAULT_ACCOUNT, user), 1.0), jobsize=size,
                   partition=ctx.partition_factor.get(partition, 1.0), qos=0.0, nice=nice)


def weighted(cfg: SchedulerConfig) -> bool:
    """Whether any factor has a weight: if none has, every priority is 0 less nice (see :func:`priority`)."""
    return any((cfg.weight_age, cfg.weight_fairshare, cfg.weight_jobsize, cfg.weight_partition, cfg.weight_qos))


def priority(f: Factors, cfg: SchedulerConfig) -> int:
    """The weighted sum less nice, never below 0."""
    total = (cfg.weight_age * f.age + cfg.weight_fairshare * f.fairshare + cfg.weight_jobsize * f.jobsize
             + cfg.weight_partition * f.partition + cfg.weight_qos * f.qos)
    return max(0, int(total) - f.nice)
