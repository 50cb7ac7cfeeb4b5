"""Job dependencies (``--dependency``): parsing, and evaluation as a pure function of the states of
the jobs referred to.

Syntax as Slurm's: ``TYPE:ID[:ID...]`` terms joined by ``,`` (all must hold) or ``?`` (any may);
types after, afterok, afternotok, afterany, aftercorr, singleton; an ID is a job id, an array's
id (all its tasks) or ``ARRAY_TASK``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pslurm.core.errors import SpecError
from pslurm.core.states import JobState

KINDS = ("after", "afterany", "afterok", "afternotok", "aftercorr", "singleton")


class DepStatus(enum.StrEnum):
    SATISFIED = "satisfied"
    WAITING = "waiting"
    NEVER = "never"


@dataclass(frozen=True)
class Ref:
    job_id: int  # a job id, or an array's id
    task_id: int | None = None  # ARRAY_TASK

    def __str__(self) -> str:
        return str(self.job_id) if self.task_id is None else f"{self.job_id}_{self.task_id}"


@dataclass(frozen=True)
class Term:
    kind: str
    refs: tuple[Ref, ...] = ()


@dataclass(frozen=True)
class Dependency:
    terms: tuple[Term, ...]
    any_of: bool = False  # joined by '?'

    @property
    def refs(self) -> set[Ref]:
        return {r for t in self.terms for r in t.refs}


@dataclass(frozen=True)
class RefJob:
    """What evaluation needs of one job referred to."""

    job_id: int
    state: JobState
    started: bool  # it has run (start time set) or is running
    array_task_id: int | None = None


def parse_dependency(text: str) -> Dependency | None:
    """None for an empty string. Raises SpecError with Slurm's wording."""
    text = text.strip()
    if not text:
        return None
    if "," in text and "?" in text:
        raise SpecError("Job dependency problem: cannot mix ',' and '?' in a dependency")
    any_of = "?" in text
    terms = []
    for part in text.split("?" if any_of else ","):
        kind, _, rest = part.partition(":")
        kind = kind.strip().lower()
        if kind not in KINDS:
            raise SpecError(f"Job dependency problem: invalid dependency type '{kind}'")
        if kind == "singleton":
            if rest:
                raise SpecError("Job dependency problem: singleton takes no job id")
            terms.append(Term(kind))
            continue
        refs = []
        for item in rest.split(":"):
            head, us, tail = item.partition("_")
            if not head.isdigit() or (us and not tail.isdigit()):
                raise SpecError(f"Job dependency problem: invalid job id '{item}' in {text}")
            refs.append(Ref(int(head), int(tail) if us else None))
        if not refs or not rest:
            raise SpecError(f"Job dependency problem: {kind} needs a job id")
        terms.append(Term(kind, tuple(refs)))
    return Dependency(tuple(terms), any_of)


_FAILED = frozenset({JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT, JobState.NODE_FAIL, JobState.DEADLINE})


def _one(kind: str, job: RefJob) -> DepStatus:
    state = job.state
    if kind == "after":
        return DepStatus.SATISFIED if job.started or state is JobState.CANCELLED else DepStatus.WAITING
    if not state.is_final:
        return DepStatus.WAITING
    if kind == "afterany":
        return DepStatus.SATISFIED
    if kind in ("afterok", "aftercorr"):
        return DepStatus.SATISFIED if state is JobState.COMPLETED else DepStatus.NEVER
    # afternotok
    return DepStatus.SATISFIED if state in _FAILED else DepStatus.NEVER


def _all(statuses: Sequence[DepStatus]) -> DepStatus:
    if DepStatus.NEVER in statuses:
        return DepStatus.NEVER
    return DepStatus.WAITING if DepStatus.WAITING in statuses else DepStatus.SATISFIED


def evaluate(dep: Dependency | None, jobs: Mapping[Ref, Sequence[RefJob]], *, own_task_id: int | None = None,
             singleton_clear: bool = True) -> DepStatus:
    """Whether ``dep`` holds, given the jobs each reference names (``jobs[ref]``: the job, or every
    task of an array; empty or missing: unknown, which can never be satisfied). ``aftercorr`` pairs
    this job's task id (``own_task_id``) with the same task of the array referred to.
    ``singleton_clear``: no other job of this name and user is running or queued ahead."""
    if dep is None:
        return DepStatus.SATISFIED
    results = []
    for term in dep.terms:
        if term.kind == "singleton":
            results.append(DepStatus.SATISFIED if singleton_clear else DepStatus.WAITING)
            continue
        per_ref = []
        for ref in term.refs:
            found = list(jobs.get(ref, ()))
            if term.kind == "aftercorr":
                found = [j for j in found if j.array_task_id == own_task_id]
            if not found:
                per_ref.append(DepStatus.NEVER)
                continue
            per_ref.append(_all([_one(term.kind, j) for j in found]))
        results.append(_all(per_ref))
    if dep.any_of:
        if DepStatus.SATISFIED in results:
            return DepStatus.SATISFIED
        return DepStatus.WAITING if DepStatus.WAITING in results else DepStatus.NEVER
    return _all(results)


def describe(text: str, status: DepStatus | None) -> str:
    """squeue's %E: ``afterok:15(unfulfilled)``, ``afterok:15(failed)``, or ``(null)``."""
    if not text:
        return "(null)"
    if status is DepStatus.SATISFIED:
        return "(null)"
    mark = "failed" if status is DepStatus.NEVER else "unfulfilled"
    sep = "?" if "?" in text else ","
    return sep.join(f"{part}({mark})" for part in text.split(sep))
