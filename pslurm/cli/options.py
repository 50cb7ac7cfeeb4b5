"""The one option table of psbatch, psrun and psalloc: Slurm 22.05's sbatch, srun and
salloc options, for the command line and ``#SBATCH``/``#PSBATCH`` lines alike.

Every option those three commands know is a row here, with its long names, short letter, the
argument it takes and the commands that know it (``b`` sbatch, ``r`` srun, ``a`` salloc), as
read off Slurm 22.05.8's own getopt tables. So a shortened name is ambiguous exactly where it is
in Slurm (``--ma`` could be ``--mail-type`` or ``--mail-user``), and only a name Slurm does not
know is an error.

A row is *real* when it has a ``dest``: a field of :class:`pslurm.core.request.JobOptions` (see
``JOB_FIELDS``) or a setting of the command itself (``wrap``, ``parsable``, ``input``). Every
other row is *inert*: accepted, its value kept in :attr:`Parsed.inert`, and one warning line
says it has no effect here (``psbatch: warning: --licenses has no effect in pslurm (no
licenses)``). To make one real: a field that is the option's text as given is one row of
:mod:`pslurm.core.jobfields` (``given``), whose option row is made here; any other gets a dest and a
help line here, its option in ``jobfields.HAND_OPTIONS``, and its meaning in ``spec_values``
(docs/architecture.md, "How to add a job option").
"""

from __future__ import annotations

import sys

from pslurm.cli.argv import NONE, OPTIONAL, REQUIRED, Opt, OptionError, parse
from pslurm.core.jobfields import FIELDS, option_fields

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from pslurm.core.request import JobOptions

COMMANDS = {"sbatch": "b", "srun": "r", "salloc": "a"}
_N, _R, _O = NONE, REQUIRED, OPTIONAL


class JobOpt(Opt):
    """A row of the table: an :class:`Opt` and the commands that know it; ``inert`` is None for
    an option pslurm implements, else why it has no effect ("" for no particular reason)."""

    __slots__ = ("commands", "inert")

    def __init__(self, names: str | tuple[str, ...], short: str, arg: str, commands: str, dest: str = "",
                 help: str = "", inert: str | None = None, flag_value: object = True, metavar: str = "") -> None:
        super().__init__(names, short, arg, dest, help, flag_value, metavar)
        self.commands = commands
        self.inert = inert


def _real(names: str | tuple[str, ...], short: str, arg: str, commands: str, help: str, dest: str = "",
          flag_value: object = True, metavar: str = "") -> JobOpt:
    return JobOpt(names, short, arg, commands, dest, help, None, flag_value, metavar)


def _inert(names: str | tuple[str, ...], short: str, arg: str, commands: str, why: str = "") -> JobOpt:
    return JobOpt(names, short, arg, commands, inert=why)


def _with_given(rows: tuple[JobOpt, ...]) -> tuple[JobOpt, ...]:
    """``rows`` (in name order) and those of the fields that are their option's text as given
    (core/jobfields.py's ``given``), each in its place by name: the order getopt lists an ambiguous
    prefix's options in (``--ma``: ``--mail-type``, ``--mail-user``)."""
    out = list(rows)
    for f in FIELDS:
        if f.given:
            row = _real(f.long_option, f.short_option, _N if f.type is bool else _R, f.commands, f.help)
            out.insert(next((i for i, r in enumerate(out) if r.name > row.name), len(out)), row)
    return tuple(out)


TABLE: tuple[JobOpt, ...] = (
    # -- implemented: JobOptions fields -------------------------------------------------------------
    _real("job-name", "J", _R, "bra", "name of the job"),
    _real("partition", "p", _R, "bra", "partition to run in"),
    _real("time", "t", _R, "bra", "time limit: M, M:S, H:M:S, D-H[:M[:S]]"),
    _real("output", "o", _R, "br", "stdout file pattern (%j %x %u %N %A %a)"),
    _real("error", "e", _R, "br", "stderr file pattern"),
    _real("nodes", "N", _R, "bra", "number of nodes: N or MIN-MAX (pslurm allocates MIN; default 1)"),
    _real("ntasks", "n", _R, "bra", "number of tasks"),
    _real("cpus-per-task", "c", _R, "bra", "CPUs per task"),
    _real("mem", "", _R, "bra", "memory per node (MB, or with K/M/G/T)"),
    _real("gres", "", _R, "bra", "generic resources per node, e.g. gpu:a100:2"),
    _real("gpus", "G", _R, "bra", "GPUs for the job in all: N or TYPE:N (ceil(N / nodes) on each node)"),
    _real("gpus-per-node", "", _R, "bra", "GPUs per node: N or TYPE:N"),
    _real("gpu-mem", "", _R, "bra", "a slice of one shared GPU's memory (pslurm's own): SIZE[K|M|G|T] or auto"),
    _real("chdir", "D", _R, "bra", "working directory of the job"),
    _real("export", "", _R, "br", "ALL (default), NONE, or NAME[=value],..."),
    _real("account", "A", _R, "bra", "account to charge (fair share)"),
    _real("nice", "", _O, "bra", "lower the job's priority by N (100 if not given; negative: operators)",
          metavar="N"),
    _real("dependency", "d", _R, "bra", "after|afterok|afternotok|afterany|aftercorr:ID[:ID],... (? for OR), "
          "singleton"),
    _real("array", "a", _R, "b", "job array: 0-99, 1,3,5-7, 0-15:4, %N throttle"),
    _real("requeue", "", _N, "b", "the job may be requeued"),
    _real("no-requeue", "", _N, "b", "the job is never requeued", dest="requeue", flag_value=False),
    _real("hold", "H", _N, "bra", "submit held (release: pscontrol release)"),
    # pslurm's own for psrun too (psrun has always taken it; srun does not know it)
    _real("kill-on-invalid-dep", "", _R, "br", "yes: cancel the job when its dependency can never be met"),
    _real("nodelist", "w", _R, "bra", "run on this node (a hostlist)"),
    _real("exclude", "x", _R, "bra", "never run on these nodes (a hostlist)"),
    _real("open-mode", "", _R, "br", "append to the output files, or truncate them (the default)",
          metavar="append|truncate"),
    _real("begin", "b", _R, "bra", "start no earlier than TIME: 16:00, now+1hour, now+60 (seconds), "
          "2026-11-24T10:00:00, tomorrow...", metavar="TIME"),
    _real("deadline", "", _R, "bra", "remove the job if it cannot end before TIME (as --begin's)", metavar="TIME"),
    _real("signal", "", _R, "bra", "send SIG (a name or number) TIME seconds (60) before the time limit; "
          "B: to the batch shell only", metavar="[B:]SIG[@TIME]"),
    _real("qos", "q", _R, "bra", "quality of service: normal (pslurm has no other)"),
    # -- implemented: the commands' own ---------------------------------------------------------------
    _real("wrap", "", _R, "b", "run this command as the script"),
    _real("parsable", "", _N, "b", "print only the job id"),
    _real("wait", "W", _N, "b", "do not exit until the job ends; exit with its exit code (an array: the highest)"),
    _real("test-only", "", _N, "b", "say when and where the job would start, without submitting it"),
    _real("input", "i", _R, "r", "stdin to the job: all (default) or none"),
    # -- srun's steps (psrun inside an allocation: SLURM_JOB_ID set, or --jobid) and salloc's own --------
    _real("jobid", "", _R, "r", "run as a step of this running job (default: $SLURM_JOB_ID, set inside a job)"),
    _real("label", "l", _N, "r", "prefix each output line with its task's rank (0: ...)"),
    _real("overlap", "", _O, "r", "the step shares the job's resources with its other steps (never waits)"),
    _real("exact", "", _N, "r", "the step takes only the CPUs and GPUs it asks for"),
    _real("whole", "", _N, "r", "the step takes all of the job's resources on its nodes (the default)"),
    _real("pty", "", _N, "r", "run task 0 on a pseudo-terminal (this terminal in raw mode)"),
    _real("gpus-per-task", "", _R, "r", "a step's GPUs per task, each task its own (psrun inside an allocation)"),
    _real("gpu-bind", "", _R, "r", "a step's tasks' GPUs: none, closest, map_gpu:I,..., mask_gpu:M,..., per_task:N"),
    _real(("ntasks-per-node", "tasks-per-node"), "", _R, "bra", "tasks per node (with -N: the task count)"),
    _real("no-shell", "", _N, "a", "grant the allocation and exit without running a command"),
    _real("help", "h", _N, "bra", ""),  # help_text lists --help last
    _real("usage", "", _N, "bra", "print a short usage line and exit"),
    _real("version", "V", _N, "bra", "print pslurm's version and exit"),
    _real("quiet", "Q", _N, "bra", "no warnings (about options that have no effect here)"),
    # -- known to Slurm, by name: no effect in pslurm (yet), those implemented since, and the rows of
    # core/jobfields.py's ``given`` fields (placed by _with_given) --------------------------------------
    *_with_given((
    _inert("accel-bind", "", _R, "r"),
    _inert("acctg-freq", "", _R, "bra", "no accounting gather plugin"),
    _inert("batch", "", _R, "b"),
    _inert("bb", "", _R, "bra", "no burst buffers"),
    _inert("bbf", "", _R, "bra", "no burst buffers"),
    _inert("bcast", "", _O, "r"),
    _inert("bcast-exclude", "", _R, "r"),
    _inert("bell", "", _N, "a"),
    _inert("cluster-constraint", "", _R, "bra", "one cluster"),
    _real(("clusters", "cluster"), "M", _R, "bra", "this cluster's name (pslurm answers for one cluster)"),
    _inert("compress", "", _O, "r"),
    _real("constraint", "C", _R, "bra", "run only on nodes with these features (Features=): A, A&B, A|B",
          metavar="LIST"),
    _inert("container", "", _R, "bra", "no OCI containers"),
    _inert("context", "", _R, "bra", "no SELinux contexts"),
    _inert("contiguous", "", _N, "bra"),
    _inert("core-spec", "S", _R, "bra"),
    _inert("cores-per-socket", "", _R, "bra"),
    _inert(("cpu-bind", "cpu_bind"), "", _R, "r"),
    _inert("cpu-freq", "", _R, "bra"),
    _real("cpus-per-gpu", "", _R, "bra", "CPUs per GPU (each node's CPUs: this times its GPUs)"),
    _inert("debugger-test", "", _N, "r"),
    _inert("delay-boot", "", _R, "bra"),
    _inert("disable-status", "X", _N, "r"),
    _inert("distribution", "m", _R, "bra"),
    _inert("epilog", "", _R, "r"),
    _real("exclusive", "", _O, "bra", "whole nodes: all their CPUs, memory and GPUs, nothing else running there "
          "(=user and =mcs: the same)", metavar="[=user|mcs]"),
    _inert("export-file", "", _R, "b"),
    _inert("extra-node-info", "B", _R, "bra"),
    _inert("get-user-env", "", _O, "ba"),
    _inert("gid", "", _R, "bra"),
    _inert("gpu-bind", "", _R, "ba"),
    _inert("gpu-freq", "", _R, "bra"),
    _inert("gpus-per-socket", "", _R, "bra"),
    _inert("gpus-per-task", "", _R, "ba"),
    _inert("gres-flags", "", _R, "bra"),
    _inert(("het-group", "pack-group"), "", _R, "r"),
    _inert("hint", "", _R, "bra"),
    _inert("ignore-pbs", "", _N, "b"),
    _inert("immediate", "I", _O, "ra"),
    _inert("input", "i", _R, "b"),  # sbatch's: the batch script's stdin
    _inert("interactive", "", _N, "r"),
    _inert("kill-command", "K", _O, "a"),
    _inert("kill-on-bad-exit", "K", _O, "r"),
    _inert("licenses", "L", _R, "bra", "no licenses"),
    _real("mail-type", "", _R, "bra", "mail at these events (kept and shown; pslurm sends no mail)"),
    _inert("mcs-label", "", _R, "bra"),
    _inert("mem-bind", "", _R, "bra"),
    _real("mem-per-cpu", "", _R, "bra", "memory per CPU (MB, or with K/M/G/T)"),
    _real("mem-per-gpu", "", _R, "bra", "memory per GPU (MB, or with K/M/G/T)"),
    _inert("mincpus", "", _R, "bra"),
    _inert("mpi", "", _R, "r"),
    _inert("msg-timeout", "", _R, "r"),
    _inert("multi-prog", "", _N, "r"),
    _inert("network", "", _R, "bra"),
    _inert("no-allocate", "Z", _N, "r"),
    _inert("no-bell", "", _N, "a"),
    _inert("no-kill", "k", _O, "bra"),
    _inert("nodefile", "F", _R, "bra"),
    _inert("ntasks-per-core", "", _R, "bra"),
    _inert("ntasks-per-gpu", "", _R, "bra"),
    _inert("ntasks-per-socket", "", _R, "bra"),
    _inert("ntasks-per-tres", "", _R, "bra"),
    _inert("overcommit", "O", _N, "bra"),
    _inert("oversubscribe", "s", _N, "bra"),
    _inert("power", "", _R, "bra"),
    _inert("prefer", "", _R, "bra", "no node features"),
    _inert("preserve-env", "E", _N, "r"),
    _inert("priority", "", _R, "bra"),
    _inert("profile", "", _R, "bra"),
    _inert("prolog", "", _R, "r"),
    _inert("propagate", "", _O, "br"),
    _inert("quit-on-interrupt", "", _N, "r"),
    _inert("reboot", "", _N, "bra"),
    _inert("relative", "r", _R, "r"),
    _inert("reservation", "", _R, "bra", "no reservations"),
    _inert("resv-ports", "", _O, "r"),
    _inert("send-libs", "", _O, "r"),
    _inert("slurmd-debug", "", _R, "r"),
    _inert("sockets-per-node", "", _R, "bra"),
    _inert("spread-job", "", _N, "bra"),
    _inert("switches", "", _R, "bra"),
    _inert("task-epilog", "", _R, "r"),
    _inert("task-prolog", "", _R, "r"),
    _inert("test-only", "", _N, "r"),  # srun's: psbatch's is real
    _inert("thread-spec", "", _R, "bra"),
    _inert("threads", "T", _R, "r"),
    _inert("threads-per-core", "", _R, "bra"),
    _inert("time-min", "", _R, "bra"),
    _inert("tmp", "", _R, "bra"),
    _inert("uid", "", _R, "bra"),
    _inert("unbuffered", "u", _N, "r"),
    _inert("use-min-nodes", "", _N, "bra"),
    _inert("verbose", "v", _N, "bra"),
    _inert("wait", "W", _R, "r"),  # srun -W SECONDS: end the step that long after its first task
    _inert("wait-all-nodes", "", _R, "ba"),
    _inert("wckey", "", _R, "bra"),
    _inert("x11", "", _O, "ra", "no X11 forwarding"),
    )),
)

# The JobOptions fields the table sets: core/jobfields.py's (tests/unit/test_options.py checks them against
# the dataclass, which this module does not import: dataclasses costs a command ~10 ms).
JOB_FIELDS = frozenset(option_fields())
NICE_DEFAULT = "100"  # --nice without a value, as Slurm


def table(command: str) -> tuple[JobOpt, ...]:
    """The rows ``command`` (``sbatch``, ``srun``, ``salloc``) knows."""
    letter = COMMANDS[command]
    return tuple(opt for opt in TABLE if letter in opt.commands)


class Parsed:
    """What a command line or a script's directives asked for: ``values`` (dest -> value, of the
    implemented options), ``inert`` (option name -> value, of the others, in order), ``positional``."""

    __slots__ = ("values", "inert", "positional")

    def __init__(self) -> None:
        self.values: dict[str, object] = {}
        self.inert: dict[str, object] = {}
        self.positional: list[str] = []

    def add(self, found: Sequence[tuple[Opt, object]]) -> None:
        for opt, value in found:
            if isinstance(opt, JobOpt) and opt.inert is not None:
                self.inert[opt.name] = value
            elif opt.dest == "nice" and value is None:
                self.values["nice"] = NICE_DEFAULT
            elif opt.dest == "exclusive" and value is None:
                self.values["exclusive"] = ""
            else:
                self.values[opt.dest] = value

    def job_values(self, base: Parsed | None = None) -> dict[str, object]:
        """The JobOptions fields given (name -> value; :func:`pslurm.core.jobdesc.spec_values` reads
        them), over those of ``base`` (the script's directives) where not given here: what
        ``job_options().over(base.job_options())`` holds, without the dataclass."""
        values = {k: v for k, v in base.values.items() if k in JOB_FIELDS} if base is not None else {}
        values.update((k, v) for k, v in self.values.items() if k in JOB_FIELDS and v is not None)
        return values

    def job_options(self) -> JobOptions:
        """The JobOptions part (imported here: the request path needs it, --help does not)."""
        from pslurm.core.request import JobOptions

        return JobOptions(**{k: v for k, v in self.values.items() if k in JOB_FIELDS})  # type: ignore[arg-type]


def parse_command_line(argv: Sequence[str], command: str) -> Parsed:
    """A command line of ``command``: options up to the first other word (the script, or the
    command to run), which starts ``positional``. Raises OptionError."""
    found, positional = parse(argv, table(command), stop_at_positional=True)
    parsed = Parsed()
    parsed.add(found)
    parsed.positional = positional
    return parsed


class DirectiveError(ValueError):
    """A directive line that the table refuses; the message names the line."""


def parse_directive_lines(lines: Sequence[tuple[int, list[str]]], command: str = "sbatch") -> Parsed:
    """The script's ``#SBATCH``/``#PSBATCH`` lines (from :func:`pslurm.core.directives.directive_lines`),
    each parsed on its own as sbatch does: a value missing at the end of a line is an error, never
    the next line's first word. Raises DirectiveError."""
    options = table(command)
    parsed = Parsed()
    for lineno, tokens in lines:
        try:
            found, positional = parse(tokens, options, stop_at_positional=True)
        except OptionError as exc:
            raise DirectiveError(f"invalid #SBATCH directive on line {lineno}: {exc}") from None
        if positional:
            raise DirectiveError(f"invalid #SBATCH directive on line {lineno}: unexpected argument "
                                 f"'{positional[0]}'")
        parsed.add([(opt, value) for opt, value in found if opt.dest not in ("help", "usage", "version")])
    return parsed


def warn_inert(prog: str, *parsed: Parsed) -> None:
    """One line per option given that has no effect here (once each), unless --quiet was given."""
    if any(p.values.get("quiet") for p in parsed):
        return
    why = {opt.name: opt.inert for opt in TABLE if opt.inert is not None}
    seen: dict[str, None] = {}
    for p in parsed:
        seen.update(dict.fromkeys(p.inert))
    for name in seen:
        reason = f" ({why[name]})" if why[name] else ""
        print(f"{prog}: warning: --{name} has no effect in pslurm{reason}", file=sys.stderr)


def usage_line(prog: str, command: str) -> str:
    """``--usage``: the short synopsis (sbatch prints its options; the help page lists them)."""
    what = {"sbatch": "[script [args...]]", "srun": "executable [args...]", "salloc": "[command [args...]]"}
    return f"Usage: {prog} [OPTIONS...] {what[command]}"


def parse_or_fail(prog: str, command: str, argv: Sequence[str] | None, usage: str, description: str,
                  arguments: Sequence[tuple[str, str]] = ()) -> Parsed:
    """:func:`parse_command_line` for a command: ``--help``, ``--usage`` and ``--version`` print and
    exit 0; a word the table refuses is Slurm's one-line error and exit 1."""
    from pslurm.cli.argv import help_text
    from pslurm.cli.common import fail

    try:
        parsed = parse_command_line(sys.argv[1:] if argv is None else argv, command)
    except OptionError as exc:
        fail(prog, str(exc))
    if parsed.values.get("help"):
        footer = (f"Every other option of Slurm's {command} is accepted, with a warning that it has no effect "
                  "in pslurm.")
        sys.stdout.write(help_text(usage, description, (o for o in table(command) if o.inert is None), footer,
                                   arguments))
        raise SystemExit(0)
    if parsed.values.get("usage"):
        print(usage_line(prog, command))
        raise SystemExit(0)
    if parsed.values.get("version"):
        from pslurm.cli.common import version_line

        print(version_line())
        raise SystemExit(0)
    return parsed
