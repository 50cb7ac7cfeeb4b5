"""A check's outcome and how the doctor prints it: ``ok``, ``warn``, ``FAIL`` or ``skip``, the check's
name, and one line saying what holds or what to fix."""

from __future__ import annotations

import sys
from dataclasses import dataclass

OK, WARN, FAIL, SKIP = "ok", "warn", "FAIL", "skip"


@dataclass(frozen=True)
class Check:
    status: str  # OK, WARN, FAIL or SKIP
    name: str  # what was checked: key, config, cgroup, isolation, nvml, ...
    message: str  # one line: what holds, or what is wrong and how to fix it

    def line(self) -> str:
        return f"{self.status:<4} {self.name}: {self.message}"


def ok(name: str, message: str) -> Check:
    return Check(OK, name, message)


def warn(name: str, message: str) -> Check:
    return Check(WARN, name, message)


def fail(name: str, message: str) -> Check:
    return Check(FAIL, name, message)


def skip(name: str, message: str) -> Check:
    return Check(SKIP, name, message)


def print_report(checks: list[Check]) -> int:
    """Print each check's line, then a summary; the exit status: 1 when any failed, else 0."""
    for check in checks:
        print(check.line())
    failed = [c.name for c in checks if c.status == FAIL]
    warned = [c.name for c in checks if c.status == WARN]
    summary = f"{len(failed)} failed ({', '.join(failed)})" if failed else "nothing failed"
    if warned:
        summary += f", {len(warned)} warning(s) ({', '.join(warned)})"
    print(f"pslurm doctor: {len(checks)} checks, {summary}")
    sys.stdout.flush()
    return 1 if failed else 0
