"""Every field of a job request, declared once: the table the commands, the JSON codec, the store and
the agents' wire read.

A row (:class:`Field`) says, for one attribute of :class:`pslurm.core.jobspec.JobSpec`:

``name``, ``type``, ``default``
    the attribute, its Python type (``str``, ``int``, ``bool``, ``float``) and its value when not asked
    (the type's own, ``""``, ``0``, ``False``, when the row gives none; None: the cluster's or partition's).
``options``, ``commands``, ``help``
    Slurm's spellings of the option that sets it (``-q, --qos``; a ``#SBATCH`` directive is the same
    words) and the commands that know it (``b`` sbatch, ``r`` srun, ``a`` salloc), for the help line.
``given``
    True: the field is the option's text as given ("" / the default when not given; a flag's truth
    for a bool). Such an option needs no code: :mod:`pslurm.cli.options` makes its row and
    :func:`pslurm.core.jobdesc.spec_values` copies it. False: ``spec_values`` reads its options and
    checks them by hand (a size, a time, a hostlist, several options at once).
``json``
    its key in slurmrestd's ``job_desc_msg`` (``pslurm.KEY``: pslurm's own, under the object's
    ``pslurm`` key); ``json_by_hand``: :mod:`pslurm.core.restjson` and :class:`pslurm.core.jobinfo.JobDesc`
    convert it by hand (``no_val`` numbers, lists, minutes), else the value goes as it is and
    ``JobDesc`` reads it back as the row's type (unless it has a property of its own that checks it).
    ``always``: the full ``job_desc_msg`` carries it at its default too (Slurm's own fields); other
    fields go only when asked, so that a request without them is the object it always was.
``wire``
    its field number in ``pslurm.proto``'s ``JobSpec`` (0: the agents are not sent it); the wire's
    field has the row's name (:mod:`pslurm.proto.convert`; tests/unit/test_jobfields.py checks both).
``column``
    the store keeps it in a column of the ``jobs`` table of its own too (the scheduler's queue, listings,
    accounting read it without the request); the column's name is the store's
    (``controller/store/queries.py`` ``SPEC_COLUMNS``). Every field is stored in the request's JSON.
``show``, ``squeue``, ``sacct``
    how ``scontrol show job`` (its ``Key=``), squeue (``-O`` name) and sacct (``--format`` name) show it.
``update``, ``update_len``
    ``scontrol update``'s key, and the fewest letters it may be cut to, for a text field any job not
    ended may change as it is (kept and shown); fields whose update has rules of their own are
    :mod:`pslurm.core.jobupdate`'s.
``max_len``, ``noun``
    the longest text a request may carry (0: no bound), refused at submit and update in one line that
    calls the field by its ``noun`` (:mod:`pslurm.core.textlimits`): Slurm's bound where slurmctld has
    one (``_S``, ``_PATH``), the store's column's size where that is narrower, else a few KiB, so that
    a listing grows with the jobs it lists, never with what one user put in a field.

Plain data and the standard library's builtins only: every command imports this on its path.
docs/architecture.md ("How to add a job option") says what a new option needs beyond its row.
"""

from __future__ import annotations


class Field:
    """One field of a job request (the module's docstring says what each attribute means)."""

    __slots__ = ("name", "type", "default", "options", "commands", "help", "given", "json", "json_by_hand",
                 "always", "wire", "column", "show", "squeue", "sacct", "update", "update_len", "max_len",
                 "noun")

    def __init__(self, name: str, type_: type, default: object = ..., *, options: str = "", commands: str = "",
                 help: str = "", given: bool = False, json: str = "", json_by_hand: bool = False,
                 always: bool = False, wire: int = 0, column: bool = False, show: str = "", squeue: str = "",
                 sacct: str = "", update: str = "", update_len: int = 0, max_len: int = 0,
                 noun: str = "") -> None:
        self.name, self.type = name, type_
        self.default = type_() if default is ... else default
        self.options, self.commands, self.help, self.given = options, commands, help, given
        self.json, self.json_by_hand, self.always = json, json_by_hand, always
        self.wire, self.column = wire, column
        self.show, self.squeue, self.sacct = show, squeue, sacct
        self.update, self.update_len, self.max_len = update, update_len, max_len
        self.noun = noun or "the " + name.replace("_", " ")

    def __repr__(self) -> str:
        return f"Field({self.name!r})"

    @property
    def long_option(self) -> str:
        """The option's long name (``qos`` of ``-q, --qos``); "" for none."""
        return next((w[2:] for w in self.options.replace(",", " ").split() if w.startswith("--")), "")

    @property
    def short_option(self) -> str:
        """The option's letter (``q`` of ``-q, --qos``); "" for none."""
        return next((w[1:] for w in self.options.replace(",", " ").split() if len(w) == 2 and w[0] == "-"), "")

    @property
    def own(self) -> bool:
        """Whether its JSON key is pslurm's own (under the object's ``pslurm`` key)."""
        return self.json.startswith("pslurm.")

    @property
    def key(self) -> str:
        """Its JSON key within its object (``submit_line`` of ``pslurm.submit_line``)."""
        return self.json.rpartition(".")[2]


_S = 1024  # Slurm's bound on a request's text (job_mgr.c's _test_strlen: comment, mail_user, alloc_node)
_PATH = 4096  # Linux's PATH_MAX: Slurm's bound on a job's paths (work_dir, std_out, ...)

FIELDS: tuple[Field, ...] = (
    # -- who and what -------------------------------------------------------------------------------
    Field("name", str, options="-J, --job-name", json="name", always=True, wire=1, column=True, show="JobName",
          squeue="name", sacct="JobName", max_len=256,
          noun="the job name"),
    Field("user", str, json="pslurm.user_name", always=True, wire=2, column=True, show="UserId", squeue="username",
          sacct="User", max_len=64,
          noun="the user name"),
    Field("uid", int, json="user_id", json_by_hand=True, wire=3, column=True, squeue="userid", sacct="UID"),
    Field("gid", int, json="group_id", json_by_hand=True, wire=4, squeue="groupid", sacct="GID"),
    Field("workdir", str, options="-D, --chdir", json="current_working_directory", always=True, wire=5,
          show="WorkDir", squeue="workdir", sacct="WorkDir", max_len=_PATH,
          noun="the working directory"),
    Field("script", str, None, json="script", wire=6),
    Field("argv", tuple, json="argv", json_by_hand=True, wire=7),
    Field("environment", dict, options="--export", json="environment", json_by_hand=True, wire=8),
    Field("partition", str, None, options="-p, --partition", json="partition", wire=9, column=True,
          show="Partition", squeue="partition", sacct="Partition", max_len=64,
          noun="the partition name"),
    Field("stdout", str, None, options="-o, --output", json="standard_output", wire=10, show="StdOut", squeue="stdout",
          max_len=_PATH, noun="the output file name"),
    Field("stderr", str, None, options="-e, --error", json="standard_error", wire=11, show="StdErr", squeue="stderr",
          max_len=_PATH, noun="the error file name"),
    # -- what it needs --------------------------------------------------------------------------------
    Field("time_limit", int, None, options="-t, --time", json="time_limit", json_by_hand=True, wire=12, column=True,
          show="TimeLimit", squeue="timelimit", sacct="Timelimit"),
    Field("num_nodes", int, 1, options="-N, --nodes", json="minimum_nodes", always=True, wire=13, column=True,
          show="NumNodes", squeue="numnodes", sacct="ReqNodes"),
    Field("ntasks", int, 1, options="-n, --ntasks", json="tasks", always=True, wire=14, show="NumTasks",
          squeue="numtasks"),
    Field("cpus_per_task", int, 1, options="-c, --cpus-per-task", json="cpus_per_task", always=True, wire=15,
          show="CPUs/Task", squeue="cpus-per-task"),
    Field("mem_mb", int, options="--mem", json="memory_per_node", json_by_hand=True, wire=16, column=True,
          show="MinMemoryNode", squeue="minmemory"),
    Field("gres", tuple, options="--gres, -G, --gpus, --gpus-per-node", json="tres_per_node", json_by_hand=True,
          wire=17, column=True, show="TresPerNode", squeue="tres-per-node"),
    Field("interactive", bool, json="pslurm.interactive", always=True, wire=18),
    Field("account", str, options="-A, --account", json="account", always=True, wire=19, column=True,
          show="Account", squeue="account", sacct="Account", max_len=64,
          noun="the account"),
    Field("nice", int, options="--nice", json="nice", always=True, wire=20, column=True, show="Nice",
          squeue="nice"),
    Field("dependency", str, options="-d, --dependency", json="dependency", always=True, wire=21, column=True,
          show="Dependency", squeue="dependency", max_len=1024,
          noun="the dependency"),
    Field("requeue", bool, None, options="--requeue, --no-requeue", json="requeue", wire=22, show="Requeue",
          squeue="requeue"),
    Field("hold", bool, options="-H, --hold", json="hold", always=True, wire=23),
    Field("array", str, options="-a, --array", json="array", always=True, wire=24, squeue="arrayjobid", max_len=4096,
          noun="the array specification"),
    Field("kill_on_invalid_dep", bool, options="--kill-on-invalid-dep", json="kill_on_invalid_dependency",
          always=True, wire=25, column=True),
    Field("nodelist", str, options="-w, --nodelist", json="required_nodes", json_by_hand=True, wire=26,
          column=True, show="ReqNodeList", squeue="reqnodes", max_len=1024,
          noun="the node list (--nodelist)"),
    Field("exclude", str, options="-x, --exclude", json="excluded_nodes", json_by_hand=True, wire=27, column=True,
          show="ExcNodeList", squeue="excnodes", max_len=1024,
          noun="the excluded node list (--exclude)"),
    Field("constraint", str, options="-C, --constraint", json="constraints", wire=41, column=True,
          show="Features", squeue="feature", sacct="Constraints", max_len=1024,
          noun="the constraint (--constraint)"),
    Field("exclusive", bool, options="--exclusive", json="pslurm.exclusive", wire=42, column=True,
          show="OverSubscribe", squeue="oversubscribe"),
    Field("open_mode", str, options="--open-mode", json="pslurm.open_mode", wire=28, max_len=16,
          noun="the open mode"),
    Field("allocation", bool, json="pslurm.allocation", wire=38),
    Field("gpu_mem", str, options="--gpu-mem", json="pslurm.gpu_mem", wire=29, max_len=64,
          noun="the GPU memory (--gpu-mem)"),
    # -- when -----------------------------------------------------------------------------------------
    Field("begin_time", float, None, options="-b, --begin", json="begin_time", json_by_hand=True, wire=30, column=True,
          show="EligibleTime", squeue="eligibletime", sacct="Eligible"),
    Field("deadline", float, None, options="--deadline", json="deadline", wire=31, column=True,
          show="Deadline"),
    Field("comment", str, options="--comment", commands="bra",
          help="a comment, shown as Comment= (pscontrol, psacct, psqueue %k)", given=True, json="comment", wire=32,
          column=True, show="Comment", squeue="comment", sacct="Comment", max_len=_S,
          noun="the comment"),
    Field("qos", str, options="-q, --qos", json="qos", wire=33, column=True, show="QOS", squeue="qos", sacct="QOS",
          max_len=64, noun="the qos"),
    Field("warn_signal", int, options="--signal", json="kill_warning_signal", json_by_hand=True, wire=34),
    Field("warn_time", int, options="--signal", json="kill_warning_delay", json_by_hand=True, wire=35),
    Field("warn_batch", bool, options="--signal", json="kill_warning_flags", json_by_hand=True, wire=36),
    Field("warn_reservation", bool, options="--signal", json="kill_warning_flags", json_by_hand=True, wire=37),
    Field("max_nodes", int, options="-N, --nodes", json="pslurm.max_nodes", json_by_hand=True, wire=39),
    Field("ntasks_per_node", int, options="--ntasks-per-node", json="tasks_per_node", wire=40,
          show="NtasksPerN:B:S:C", squeue="ntpernode"),
    # -- where it came from (shown, kept) -------------------------------------------------------------
    Field("command", str, json="pslurm.command", show="Command", squeue="command", max_len=_PATH,
          noun="the command"),
    Field("submit_host", str, json="pslurm.submit_host", show="AllocNode:Sid", max_len=_S,
          noun="the submit host"),
    Field("submit_sid", int, json="pslurm.submit_sid", show="AllocNode:Sid"),
    Field("submit_line", str, json="pslurm.submit_line", sacct="SubmitLine", max_len=16 * 1024,
          noun="the submit line"),
    # -- memory and CPUs per GPU or CPU -----------------------------------------------------------------
    Field("mem_per_cpu_mb", int, options="--mem-per-cpu", json="memory_per_cpu", json_by_hand=True,
          show="MinMemoryCPU"),
    Field("mem_per_gpu_mb", int, options="--mem-per-gpu", json="pslurm.mem_per_gpu_mb", show="MemPerTres"),
    Field("cpus_per_gpu", int, options="--cpus-per-gpu", json="pslurm.cpus_per_gpu", show="CpusPerTres"),
    # -- mail (kept and shown; pslurm sends no mail, as Slurm without a MailProg) ----------------------
    Field("mail_type", str, options="--mail-type", json="mail_type", show="MailType", update="MailType",
          update_len=5, max_len=256,
          noun="the mail type"),
    Field("mail_user", str, options="--mail-user", commands="bra",
          help="mail to this user (kept and shown; pslurm sends no mail)", given=True, json="mail_user",
          show="MailUser", update="MailUser", update_len=5, max_len=_S,
          noun="the mail user"),
    # -- the job's GPUs in all (--gpus: Slurm's TRES_PER_JOB; its GPUs per node are in gres) -----------
    Field("tres_per_job", str, options="-G, --gpus", json="tres_per_job", show="TresPerJob", squeue="tres-per-job",
          max_len=256, noun="the GPUs of the job (--gpus)"),
)

BY_NAME = {f.name: f for f in FIELDS}

# The option values spec_values reads by hand (sbatch's long options, as dests), beside the ``given``
# rows' own: with them, every field of :class:`pslurm.core.request.JobOptions`.
HAND_OPTIONS = (
    "job_name", "partition", "account", "qos", "time", "output", "error", "nodes", "ntasks", "cpus_per_task",
    "mem", "gres", "gpus", "gpus_per_node", "chdir", "export", "nice", "dependency", "array", "requeue", "hold",
    "kill_on_invalid_dep", "nodelist", "exclude", "constraint", "exclusive", "open_mode", "gpu_mem", "begin",
    "deadline", "signal", "ntasks_per_node", "mem_per_cpu", "mem_per_gpu", "cpus_per_gpu", "mail_type",
)


def option_fields() -> tuple[str, ...]:
    """Every option value a job request is made of (a :class:`~pslurm.core.request.JobOptions` field):
    the hand-read ones, then the ``given`` rows'."""
    return HAND_OPTIONS + tuple(f.name for f in FIELDS if f.given)
