"""Run the corpus on both clusters, and write what came of it.

``python -m tests.conformance.run [--reuse DIR] [--only TEXT] [--show]`` does what the pytest suite
does (tests/conformance/test_conformance.py) and prints each case that differs: start both clusters,
set the scenario up, run every case, write docs/conformance.md. ``--reuse DIR`` runs the cases that
only read against the clusters a former run left up in DIR (no set-up: quicker while one works on a
command); ``--only`` keeps the cases whose id contains TEXT.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from tests.conformance import scenario
from tests.conformance.corpus import CASES, Case
from tests.conformance.differences import DIFFERENT, LEFT, NOT_YET, reason_for
from tests.conformance.harness import Answer, Outcome, Side, compare, id_from_submission, normalise, rows_in_any_order

REPO = Path(__file__).resolve().parents[2]
REPORT = REPO / "docs" / "conformance.md"


class Run:
    """Both clusters up, the scenario set, and the outcome of each case run so far."""

    def __init__(self, root: Path, bin_dir: Path, reuse: bool = False) -> None:
        self.root, self.bin_dir = root, bin_dir
        state_file = root / "sides.json"
        if reuse:
            saved = json.loads(state_file.read_text())
            self.pslurm_state = Path(saved["pslurm_state"])
            self.slurm, self.pslurm = (Side(**{**s, "workdir": Path(s["workdir"])}) for s in saved["sides"])
        else:
            with ThreadPoolExecutor(2) as pool:
                slurm_up = pool.submit(scenario.start_slurm)
                pslurm_up = pool.submit(scenario.start_pslurm, root, bin_dir)
                slurm_up.result()
                self.pslurm_state, names = pslurm_up.result()
            self.slurm, self.pslurm = scenario.sides(root, self.pslurm_state, names)
            scenario.set_up_both(self.slurm, self.pslurm)
            state_file.write_text(json.dumps({"pslurm_state": str(self.pslurm_state), "sides": [
                {**asdict(s), "workdir": str(s.workdir)} for s in (self.slurm, self.pslurm)]}))
        self.outcomes: dict[str, Outcome] = {}

    def run_case(self, case: Case) -> Outcome:
        with ThreadPoolExecutor(2) as pool:
            theirs, mine = (pool.submit(side.run, case.line, case.stdin) for side in (self.slurm, self.pslurm))
            slurm, pslurm = theirs.result(), mine.result()
        submitted = id_from_submission(slurm.out), id_from_submission(pslurm.out)
        if case.command in ("sbatch", "srun", "salloc") and submitted[0] and submitted[1]:
            self.pslurm.ids[f"case:{case.id}"], self.slurm.ids[f"case:{case.id}"] = submitted[1], submitted[0]
        ids = scenario.id_map(self.slurm, self.pslurm)
        slurm = Answer(slurm.rc, normalise(slurm.out, self.slurm, {}), normalise(slurm.err, self.slurm, {}))
        pslurm = Answer(pslurm.rc, normalise(pslurm.out, self.pslurm, ids), normalise(pslurm.err, self.pslurm, ids))
        # measured seconds (ElapsedRaw, PendingTime...): Slurm's scheduling and launch take a second or two
        measured = any(word in case.id for word in ("Raw", "RAW", "PendingTime"))
        slow = frozenset(self.slurm.ids.values() if measured else {self.slurm.ids.get("timeout", "")}) - {""}
        outcome = Outcome(slurm, pslurm, compare(slurm, pslurm, rows_in_any_order(case.line), slow))
        self.outcomes[case.id] = outcome
        return outcome

    def close(self) -> None:
        scenario.stop_pslurm(self.pslurm_state, self.bin_dir)


def verdict(case: Case, outcome: Outcome) -> str:
    """``identical``, ``different`` (on purpose), ``not yet`` (a difference pslurm still has, listed) or
    ``failing``."""
    if not outcome.differs:
        return "identical"
    if reason_for(case.id, DIFFERENT):
        return "different"
    if reason_for(case.id, NOT_YET):
        return "not yet"
    return "failing"


def write_report(outcomes: dict[str, Outcome], path: Path = REPORT) -> None:
    """docs/conformance.md: per command, the cases identical, different on purpose (each with its
    reason) and failing."""
    by_command: dict[str, dict[str, list[Case]]] = {}
    for case in CASES:
        if case.id in outcomes:
            found = verdict(case, outcomes[case.id])
            by_command.setdefault(case.command, {}).setdefault(found, []).append(case)
    total = {k: sum(len(v.get(k, [])) for v in by_command.values())
             for k in ("identical", "different", "not yet", "failing")}
    lines = [
        "# Conformance with Slurm 22.05",
        "",
        "Written by the conformance suite (`tests/conformance`, `python -m tests.conformance.run`): every",
        "case is a command line run on a pslurm cluster and on Slurm 22.05 (Debian's packages) of the same",
        "shape after the same jobs were set up on both (4 nodes x 2 GPUs, partition `gpu`; jobs pending,",
        "held, dependent, running on one node and on two, with a step, completed, failed, killed, cancelled,",
        "timed out, a held array, a drained node). Exit status, stdout and stderr's words are compared once",
        "what must differ is made equal (job ids where they differ and those of jobs a case submits, the",
        "working directory, the host name, absolute times, process and session ids; a run time may differ",
        "by a few seconds; squeue's rows without -S in any order). The lines are those of the commands'",
        "every option, of handbooks, and of the tools people drive Slurm with (submitit, snakemake's Slurm",
        "executor, dask-jobqueue, Nextflow, parsl, Open OnDemand, Lightning, prometheus-slurm-exporter);",
        "`tests/conformance/corpus.py` has them and their sources.",
        "",
        f"**{sum(total.values())} cases: {total['identical']} identical, {total['different']} different on purpose, "
        f"{total['not yet'] + total['failing']} failing.**",
        "",
        "| command | cases | identical | different on purpose | failing |",
        "| --- | ---: | ---: | ---: | ---: |",
    ]
    for command in sorted(by_command):
        counts = by_command[command]
        n = {k: len(counts.get(k, [])) for k in ("identical", "different", "not yet", "failing")}
        lines.append(f"| {command} | {sum(n.values())} | {n['identical']} | {n['different']} | "
                     f"{n['not yet'] + n['failing']} |")
    lines += ["", "## Different on purpose", "",
              "Where pslurm answers otherwise than Slurm 22.05 because its answer is better, or because the two",
              "systems cannot say the same thing; the suite fails on any other difference.", ""]
    for case in CASES:
        if case.id in outcomes and verdict(case, outcomes[case.id]) == "different":
            lines.append(f"- `{case.id}`: {reason_for(case.id, DIFFERENT)}")
    failing = [c for c in CASES if c.id in outcomes and verdict(c, outcomes[c.id]) in ("not yet", "failing")]
    lines += ["", "## Failing", "",
              "Differences pslurm still has, each with what it needs (listed in the suite, so that a new one",
              "fails it and a mended one must be taken off the list).", ""]
    if not failing:
        lines.append("None.")
    for case in failing:
        why = reason_for(case.id, NOT_YET) or "(not listed)"
        lines.append(f"- `{case.id}` ({outcomes[case.id].differs}): {why}")
    lines += ["", "## Known differences no case shows", "",
              "What the conformance work found that needs a scenario of its own (listed in the suite's",
              "`differences.LEFT`), each with why:", ""]
    lines += [f"- {what}: {why}" for what, why in LEFT.items()]
    path.write_text("\n".join(lines) + "\n")


def show(case: Case, outcome: Outcome) -> str:
    def block(answer: Answer) -> str:
        return f"  rc={answer.rc}\n  out: {answer.out!r}\n  err: {answer.err!r}"

    return f"== {case.id}  [{outcome.differs}]\n-- slurm\n{block(outcome.slurm)}\n-- pslurm\n{block(outcome.pslurm)}"


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--dir", default="", help="where the clusters' state goes (kept for --reuse)")
    parser.add_argument("--reuse", action="store_true", help="the clusters a run left up in --dir; readers only")
    parser.add_argument("--only", default="", help="cases whose id contains this")
    parser.add_argument("--show", action="store_true", help="print every failing case's answers")
    parser.add_argument("--keep", action="store_true", help="leave pslurm's cluster up")
    args = parser.parse_args()
    root = Path(args.dir or tempfile.mkdtemp(prefix="conformance-"))
    root.mkdir(parents=True, exist_ok=True)
    run = Run(root, Path(sys.executable).parent, reuse=args.reuse)
    try:
        cases = [c for c in CASES if args.only in c.id and not (args.reuse and c.phase)]
        for case in cases:
            outcome = run.run_case(case)
            found = verdict(case, outcome)
            if found in ("failing", "not yet") and args.show:
                print(show(case, outcome))
        if not args.reuse and not args.only:
            write_report(run.outcomes)
        (root / "outcomes.json").write_text(json.dumps(
            {cid: {"differs": o.differs, "slurm": asdict(o.slurm), "pslurm": asdict(o.pslurm)}
             for cid, o in run.outcomes.items()}, indent=1))
        counts: dict[str, int] = {}
        for case in cases:
            key = verdict(case, run.outcomes[case.id])
            counts[key] = counts.get(key, 0) + 1
        print(f"{len(cases)} cases: {counts}  (state in {root})")
    finally:
        if not (args.keep or args.reuse):
            run.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
