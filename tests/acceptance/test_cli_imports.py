"""The Slurm work-alikes import only the standard library and pslurm's small modules on their path.

Each command runs as a subprocess under PYTHONPROFILEIMPORTTIME=1 (``--help``, then one real request
against a cluster of `pslurm up`); every module it imported is read from stderr's ``import time:``
lines, and a test fails naming any module of the heavy set. Their cold start is what people and
tools wait for (docs/benchmarks.md has the figures; nothing here is timed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import BIN, Cluster

COMMANDS = ("psbatch", "psrun", "psalloc", "psqueue", "psinfo", "pscancel", "pscontrol", "psprio", "psacct",
            "psacctmgr", "psshare", "psdiag", "pseff", "psreport", "psstat")
FORBIDDEN = ("typer", "click", "pydantic", "rich", "grpc", "google", "sqlalchemy", "alembic", "jinja2", "hostlist",
             "email", "http.client", "ssl", "asyncio", "aiohttp")


def imported_modules(stderr: str) -> list[str]:
    """The modules named by ``-X importtime`` lines (``import time: self | cumulative | name``)."""
    names = []
    for line in stderr.splitlines():
        if line.startswith("import time:") and "|" in line:
            name = line.rsplit("|", 1)[1].strip()
            if name != "imported package":  # the header line
                names.append(name)
    return names


def forbidden(modules: list[str]) -> list[str]:
    return sorted({m for m in modules for bad in FORBIDDEN if m == bad or m.startswith(bad + ".")})


def traced(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
           input: str = "") -> subprocess.CompletedProcess[str]:
    environ = {**(env if env is not None else os.environ), "PYTHONPROFILEIMPORTTIME": "1"}
    return subprocess.run([str(BIN / args[0]), *args[1:]], env=environ, cwd=cwd, capture_output=True, text=True,
                          timeout=60, input=input)


def test_the_parser_reads_importtime_lines() -> None:
    stderr = ("import time: self [us] | cumulative | imported package\n"
              "import time:       120 |        120 |   _io\n"
              "import time:        80 |       2100 | grpc._cython\n")
    assert imported_modules(stderr) == ["_io", "grpc._cython"]
    assert forbidden(["grpc._cython", "http", "http.client", "emailx", "json"]) == ["grpc._cython", "http.client"]


@pytest.mark.parametrize("command", COMMANDS)
def test_help_imports_nothing_heavy(command: str) -> None:
    proc = traced(command, "--help")
    assert proc.returncode == 0, proc.stderr[-2000:]
    modules = imported_modules(proc.stderr)
    assert modules, "no import time lines: was PYTHONPROFILEIMPORTTIME honoured?"
    assert forbidden(modules) == [], f"{command} --help imports {forbidden(modules)}"


@pytest.mark.parametrize("command", ["psbatch", "psrun", "psalloc"])
def test_a_refused_option_imports_nothing_heavy(command: str) -> None:
    proc = traced(command, "--bogus-flag", "true")
    assert proc.returncode == 1
    assert forbidden(imported_modules(proc.stderr)) == []


REQUESTS = [
    ("psbatch", "--parsable", "-o", "/dev/null", "--wrap", "true"),
    ("psrun", "true"),
    ("psalloc", "-J", "imports", "true"),
    ("psqueue", "-t", "all"),
    ("psinfo",),
    ("pscancel", "999999"),
    ("pscontrol", "show", "node", "c000"),
    ("psprio",),
    ("psacct", "-a"),
    ("psacctmgr", "-s", "list", "user"),
    ("psshare", "-a"),
    ("psdiag",),
    ("pseff", "1"),
    ("psreport", "cluster", "utilization"),
    ("pscontrol", "token"),
    ("psstat", "-j", "1"),
]


@pytest.mark.parametrize("argv", REQUESTS, ids=[r[0] for r in REQUESTS])
def test_a_request_imports_nothing_heavy(cluster: Cluster, tmp_path: Path, argv: tuple[str, ...]) -> None:
    # The request goes through pslurm.client: this holds once the client speaks HTTP/JSON with the
    # standard library alone (issue #12); with the gRPC client it names grpc and google.
    proc = traced(*argv, env=cluster.env, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]  # pscancel of an unknown id is 1
    heavy = forbidden(imported_modules(proc.stderr))
    assert heavy == [], f"{' '.join(argv)} imports {heavy}"


# The goal commands of issue 12 (cold start at most twice a bare interpreter's), and psinfo: their request path
# reads the API's JSON as it is (pslurm.client.api, pslurm.core.jobinfo), without the domain's
# dataclasses and without typing, which cost a command some 10-20 ms.
GOAL_REQUESTS = [
    ("psbatch", "--parsable", "-o", "/dev/null", "--wrap", "true"),
    ("psrun", "true"),
    ("psalloc", "-J", "imports", "true"),
    ("psqueue",),
    ("pscancel", "999999"),
    ("psacct", "-a"),
    ("pscontrol", "show", "job"),
    ("psinfo",),
]
# each costs milliseconds of a command's ~18 ms budget: typing, dataclasses and inspect; hashlib (it loads OpenSSL;
# the credential's HMAC is over CPython's own SHA-256), socket and selectors (pslurm.client.http speaks through
# _socket), the IDNA codec (a host given to getaddrinfo as text), shlex (pslurm.conf's quotes are read by hand)
LIGHT = ("typing", "dataclasses", "inspect", "hashlib", "hmac", "socket", "selectors", "encodings.idna", "shlex")


def _light_violations(argv: tuple[str, ...], cluster: Cluster, tmp_path: Path, names: tuple[str, ...]) -> list[str]:
    proc = traced(*argv, env=cluster.env, cwd=tmp_path)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    return sorted({m for m in imported_modules(proc.stderr) for bad in names if m == bad or m.startswith(bad + ".")})


@pytest.mark.parametrize("argv", GOAL_REQUESTS, ids=[" ".join(r[:2]) for r in GOAL_REQUESTS])
def test_a_goal_request_imports_nothing_light_either(cluster: Cluster, tmp_path: Path,
                                                          argv: tuple[str, ...]) -> None:
    assert _light_violations(argv, cluster, tmp_path, LIGHT) == []



# What each goal request imports of the standard library's costlier modules: re (json's decoder and encoder
# import it: the API's JSON is read by _json itself, pslurm.client.wirejson; --mem is read by hand; base64 imports
# it: psrun's output goes through binascii), json, enum (pslurm.core.states' classes are not enum's), signal (it
# makes enums: the commands set SIGPIPE through _signal), collections. What is still imported is named in
# docs/benchmarks.md: psalloc's signal handling and its revocation thread (threading imports collections).
HEAVIER = ("re", "json", "enum", "signal", "collections", "base64")
STILL = {"psbatch": (), "psrun": (), "psalloc": ("collections", "signal", "enum"), "psqueue": (),
         "psacct": (), "pscontrol": (), "psinfo": (), "pscancel": ()}


@pytest.mark.parametrize("argv", GOAL_REQUESTS, ids=[" ".join(r[:2]) for r in GOAL_REQUESTS])
def test_a_goal_request_imports_no_regular_expressions_and_no_json_module(cluster: Cluster, tmp_path: Path,
                                                                          argv: tuple[str, ...]) -> None:
    # the launcher run as a plain install runs it: -S, pslurm found on a path (an editable install's finder,
    # which the test environment's start would run, imports re itself)
    names = tuple(name for name in HEAVIER if name not in STILL[argv[0]])
    env = {**cluster.env, "PYTHONPATH": str(REPO), "PYTHONPROFILEIMPORTTIME": "1"}
    proc = subprocess.run([sys.executable, "-S", str(BIN / argv[0]), *argv[1:]], env=env, cwd=tmp_path,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    modules = imported_modules(proc.stderr)
    assert "pslurm.cli.common" in modules
    assert sorted({m for m in modules for bad in names if m == bad or m.startswith(bad + ".")}) == []


# The ps* commands are one launcher (scripts/pslurm-command) that starts the interpreter with -S: an environment's
# .pth files' code (and sitecustomize) runs only where pslurm is reachable through nothing else (an editable finder).
LAUNCHER = Path(__file__).resolve().parents[2] / "scripts" / "pslurm-command"
REPO = LAUNCHER.parents[1]
HOOK = "import sys; sys.stderr.write('a .pth hook ran\\n')"


def _environment(tmp_path: Path, pth: str, long_form: bool = False) -> Path:
    """A venv whose site-packages has a .pth with a hook line and ``pth`` (how pslurm is reached), the
    launcher as its psinfo, and the `pslurm` script the launcher reads the interpreter from."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    site_packages = next(venv.glob("lib/python3*/site-packages"))
    (site_packages / "hook.pth").write_text(HOOK + "\n")
    (site_packages / "pslurm-here.pth").write_text(pth + "\n")
    python = str(venv / "bin" / "python")
    head = f"#!/bin/sh\n'''exec' \"{python}\" \"$0\" \"$@\"\n' '''\n" if long_form else f"#!{python}\n"
    (venv / "bin" / "pslurm").write_text(head + "print('the pslurm command')\n")
    (venv / "bin" / "psinfo").write_text(LAUNCHER.read_text())
    (venv / "bin" / "psinfo").chmod(0o755)
    return venv


@pytest.mark.parametrize("long_form", [False, True], ids=["#!python", "pip's /bin/sh form"])
def test_the_launcher_runs_no_pth_hook_where_pslurm_is_on_a_site_path(tmp_path: Path, long_form: bool) -> None:
    venv = _environment(tmp_path, str(REPO), long_form)  # a path line (an installed pslurm is the same)
    proc = subprocess.run([str(venv / "bin" / "psinfo"), "--usage"], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: psinfo") and "hook ran" not in proc.stderr


def test_the_launcher_runs_the_hooks_where_pslurm_is_reached_through_one(tmp_path: Path) -> None:
    venv = _environment(tmp_path, f"import sys; sys.path.append({str(REPO)!r})")  # as an editable finder
    proc = subprocess.run([str(venv / "bin" / "psinfo"), "--usage"], capture_output=True, text=True, timeout=60,
                          env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"})
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("Usage: psinfo") and "a .pth hook ran" in proc.stderr
