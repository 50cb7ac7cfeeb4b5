"""The dashboard's pages as HTML: pure functions of what a handler read, every value escaped.

Plain server-rendered HTML with one stylesheet and one small script (``static/``): nothing is built,
nothing is fetched from elsewhere, a page works without JavaScript but for the output tail's refresh.
Links are relative to ``base`` (the dashboard's root as the browser sees it, behind a proxy too).
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from html import escape
from urllib.parse import urlencode

from pslurm.controller.monitor import NodeStatus
from pslurm.controller.priority import Factors, ShareRow
from pslurm.controller.store import StepRecord
from pslurm.controller.store.stats import GpuHours
from pslurm.core.jobspec import JobRecord
from pslurm.core.timefmt import format_duration, format_timestamp

NAV = (("", "Cluster"), ("queue", "Queue"), ("usage", "Usage"))


@dataclass(frozen=True)
class Page:
    """Where a listing is: its page (from 1), how many pages, how many items in all."""

    number: int
    pages: int
    total: int


@dataclass(frozen=True)
class Viewer:
    """Who looks, and where the dashboard is."""

    base: str  # the dashboard's root path as the browser sees it ("/dashboard", "/slurm/dashboard")
    user: str
    uid: int
    operator: bool


def e(value: object) -> str:
    return escape("" if value is None else str(value))


def _when(t: float | None) -> str:
    return format_timestamp(t) if t else "-"


def _gb(mb: float | None) -> str:
    return "-" if mb is None else f"{mb / 1024:.1f} GB"


def layout(viewer: Viewer, title: str, body: str, active: str = "") -> str:
    nav = "".join(f'<a href="{e(viewer.base)}/{path}"{" class=active" if path == active else ""}>{e(name)}</a>'
                  for path, name in NAV)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>{e(title)} - pslurm</title><link rel="stylesheet" href="{e(viewer.base)}/static/dashboard.css"></head>
<body><header><span class="brand">pslurm</span><nav>{nav}</nav>
<form class="who" method="post" action="{e(viewer.base)}/logout"><span>{e(viewer.user)}</span>
<button type="submit">Log out</button></form></header>
<main><h1>{e(title)}</h1>{body}</main>
<script src="{e(viewer.base)}/static/dashboard.js"></script></body></html>"""


def login_page(base: str, error: str = "") -> str:
    message = f'<p class="error" role="alert">{e(error)}</p>' if error else ""
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Log in - pslurm</title>
<link rel="stylesheet" href="{e(base)}/static/dashboard.css"></head>
<body class="login"><main><h1>pslurm</h1>{message}
<form method="post" action="{e(base)}/login">
<label for="token">Token</label>
<textarea id="token" name="token" rows="4" required autocomplete="off"
 placeholder="the output of: pscontrol token"></textarea>
<button id="login" type="submit">Log in</button></form>
<p class="hint">Paste a token from <code>pscontrol token</code>, or a credential such as the commands
sign (see docs/dashboard.md). You stay logged in for 8 hours.</p></main></body></html>"""


def pager(viewer: Viewer, path: str, params: Mapping[str, str], page: Page) -> str:
    if page.pages <= 1:
        return f'<p class="pager">{page.total} in all</p>'

    def link(number: int, text: str) -> str:
        query = urlencode({**{k: v for k, v in params.items() if v}, "page": str(number)})
        return f'<a href="{e(viewer.base)}/{path}?{e(query)}">{e(text)}</a>'

    parts = [link(page.number - 1, "previous")] if page.number > 1 else []
    parts.append(f"<span>page {page.number} of {page.pages} ({page.total} in all)</span>")
    if page.number < page.pages:
        parts.append(link(page.number + 1, "next"))
    return f'<p class="pager">{" ".join(parts)}</p>'


def _job_link(viewer: Viewer, job_id: int, text: str | None = None) -> str:
    return f'<a href="{e(viewer.base)}/job/{job_id}">{e(text or job_id)}</a>'


def _table(head: Sequence[str], rows: Iterable[str], cls: str = "") -> str:
    th = "".join(f"<th>{e(h)}</th>" for h in head)
    return f'<table class="{cls}"><thead><tr>{th}</tr></thead><tbody>{"".join(rows)}</tbody></table>'


def _bar(percent: float | None) -> str:
    if percent is None:
        return '<span class="bar none"></span>'
    width = max(0.0, min(100.0, percent))
    return f'<span class="bar"><span style="width:{width:.0f}%"></span></span>'


def cluster_page(viewer: Viewer, summary: Mapping[str, int], shown: Sequence[NodeStatus],
                 holders: Mapping[tuple[str, int], Sequence[tuple[int, str]]], page: Page, state: str,
                 now: float) -> str:
    """Every node (a page of them) with each GPU: utilisation, memory, the jobs and users on it."""
    cards = "".join(f'<div class="card"><b>{e(v)}</b><span>{e(k)}</span></div>' for k, v in summary.items())
    states = ("", "idle", "mix", "alloc", "drain", "drng", "down")
    options = "".join(f'<option value="{s}"{" selected" if s == state else ""}>{s or "all states"}</option>'
                      for s in states)
    rows = []
    for s in shown:
        node = s.node
        gpus = []
        for g in s.gpus:
            jobs = ", ".join(f"{_job_link(viewer, j)} {e(u)}" for j, u in holders.get((node.name, g.index), ()))
            util = "-" if g.util is None else f"{g.util:.0f}%"
            memory = f"{_gb(g.memory_used_mb)} / {_gb(g.memory_mb) if g.memory_mb else '?'}"
            gpus.append(f'<div class="gpu" data-gpu="{g.index}"><span class="gpu-name">gpu{g.index}</span>'
                        f"{_bar(g.util)}<span>{e(util)}</span><span>{e(memory)}</span><span>{jobs or 'free'}</span>"
                        "</div>")
        age = f"{now - node.last_heartbeat:.0f}s ago" if node.last_heartbeat else "never"
        rows.append(f'<tr class="state-{e(s.word)}"><td>{e(node.name)}</td><td><span class="badge">{e(s.word)}'
                    f'</span></td><td>{e(node.reason) or ""}</td><td>{s.used.cpus}/{node.cpus}</td>'
                    f"<td>{e(s.used.mem_mb)}/{e(node.real_memory)} MB</td><td>{e(age)}</td>"
                    f'<td class="gpus">{"".join(gpus) or "-"}</td></tr>')
    form = (f'<form class="filter" method="get" action="{e(viewer.base)}/"><select name="state">{options}</select>'
            '<button type="submit">Show</button></form>')
    return layout(viewer, "Cluster", f'<div class="cards">{cards}</div>{form}'
                  + _table(("Node", "State", "Reason", "CPUs", "Memory", "Heartbeat", "GPUs"), rows, "nodes")
                  + pager(viewer, "", {"state": state}, page), active="")


QUEUE_STATES = ("active", "pending", "running", "finished", "all")


def queue_page(viewer: Viewer, jobs: Sequence[JobRecord], page: Page, state: str, user: str, now: float) -> str:
    """A page of the queue: running jobs, then pending ones by priority with their reason and expected start."""
    options = "".join(f'<option value="{s}"{" selected" if s == state else ""}>{s}</option>' for s in QUEUE_STATES)
    form = (f'<form class="filter" method="get" action="{e(viewer.base)}/queue"><select name="state">{options}'
            f'</select><input name="user" placeholder="user" value="{e(user)}"><button type="submit">Show</button>'
            "</form>")
    rows = []
    for j in jobs:
        ran = format_duration((j.end_time or now) - j.start_time) if j.start_time else "0:00"
        where = ",".join(j.all_nodes) if j.all_nodes else f"({j.reason.value})"
        rows.append(f'<tr><td>{_job_link(viewer, j.job_id, j.display_id)}</td><td>{e(j.partition)}</td>'
                    f"<td>{e(j.spec.name)}</td><td>{e(j.spec.user)}</td><td>{e(j.spec.account)}</td>"
                    f'<td><span class="badge st-{e(j.state.short)}">{e(j.state.short)}</span></td><td>{e(ran)}</td>'
                    f"<td>{e(where)}</td><td>{j.priority}</td><td>{e(_when(j.start_estimate))}</td></tr>")
    head = ("JobID", "Partition", "Name", "User", "Account", "ST", "Time", "NodeList(Reason)", "Priority",
            "Expected start")
    return layout(viewer, "Queue", form + _table(head, rows, "jobs")
                  + pager(viewer, "queue", {"state": state, "user": user}, page), active="queue")


def job_page(viewer: Viewer, job: JobRecord, steps: Sequence[StepRecord], factors: Factors | None,
             charts: Sequence[str], may_see_output: bool, now: float) -> str:
    """A job: its record (as pscontrol show job), its steps, its GPUs over time, its output's tail."""
    spec = job.spec
    gpus = "; ".join(f"{n}:{','.join(map(str, g))}" for n, g in zip(job.all_nodes, job.node_gpus or
                                                                   (job.gpu_indices,), strict=False) if g)
    fields: list[tuple[str, object]] = [
        ("JobId", job.display_id), ("JobName", spec.name), ("UserId", spec.user), ("Account", spec.account or "-"),
        ("Partition", job.partition), ("JobState", job.state.value), ("Reason", job.reason.value),
        ("Priority", job.priority), ("SubmitTime", _when(job.submit_time)), ("StartTime", _when(job.start_time)),
        ("EndTime", _when(job.end_time)),
        ("RunTime", format_duration((job.end_time or now) - job.start_time) if job.start_time else "-"),
        ("TimeLimit", format_duration(job.time_limit) if job.time_limit else "UNLIMITED"),
        ("NodeList", ",".join(job.all_nodes) or "-"), ("GPUs", gpus or "-"),
        ("Gres", ",".join(str(g) for g in spec.gres) or "-"),
        ("NumCPUs", spec.cpus), ("MinMemoryNode", f"{spec.mem_mb}M" if spec.mem_mb else "-"),
        ("ExitCode", f"{job.exit_code}:{job.exit_signal}"), ("WorkDir", spec.workdir or "-"),
        ("Command", " ".join(spec.argv) or "(batch script)"), ("StdOut", spec.stdout or "slurm-%j.out"),
        ("Dependency", spec.dependency or "-"), ("Comment", spec.comment or "-"),
        ("SystemComment", job.system_comment or "-"),
        ("GpuMemPeak", f"{job.peak_gpu_memory_mb} MB" if job.peak_gpu_memory_mb is not None else "-"),
        ("GpuUtil", f"{job.mean_gpu_util:.1f}%" if job.mean_gpu_util is not None else "-")]
    if job.start_estimate and job.state.value == "PENDING":
        fields.insert(11, ("ExpectedStart", _when(job.start_estimate)))
    record = "".join(f"<tr><th>{e(k)}</th><td>{e(v)}</td></tr>" for k, v in fields)
    body = [f'<table class="record">{record}</table>']
    if factors is not None:
        body.append("<h2>Priority factors</h2>" + _table(
            ("Age", "FairShare", "JobSize", "Partition", "QOS", "Nice"),
            [f"<tr><td>{factors.age:.4f}</td><td>{factors.fairshare:.4f}</td><td>{factors.jobsize:.4f}</td>"
             f"<td>{factors.partition:.4f}</td><td>{factors.qos:.4f}</td><td>{factors.nice}</td></tr>"]))
    if steps:
        body.append("<h2>Steps</h2>" + _table(
            ("Step", "Name", "State", "Nodes", "Tasks", "Start", "End", "ExitCode"),
            [f"<tr><td>{job.job_id}.{s.step_id}</td><td>{e(s.name)}</td><td>{e(s.state.value)}</td>"
             f"<td>{e(s.nodes)}</td><td>{s.ntasks}</td><td>{e(_when(s.start_time))}</td>"
             f"<td>{e(_when(s.end_time))}</td><td>{s.exit_code}:{s.exit_signal}</td></tr>" for s in steps]))
    if charts:
        body.append('<h2>GPUs</h2><div class="charts">' + "".join(charts) + "</div>")
    body.append("<h2>Output</h2>")
    if may_see_output:
        body.append(f'<pre id="tail" class="tail" data-src="{e(viewer.base)}/api/job/{job.job_id}/tail">'
                    "loading...</pre>")
    else:
        body.append(f'<p class="private" id="tail-refused">The output of job {e(job.display_id)} is its owner\'s '
                    f"({e(spec.user)}): not yours to see.</p>")
    return layout(viewer, f"Job {job.display_id}", "".join(body), active="queue")


def usage_page(viewer: Viewer, start: float, end: float, rows: Sequence[GpuHours], shares: Sequence[ShareRow]) -> str:
    """GPU hours per user and account in a period, and the fair-share tree."""
    day = "%Y-%m-%d"
    form = (f'<form class="filter" method="get" action="{e(viewer.base)}/usage">'
            f'<label>from <input type="date" name="from" value="{time.strftime(day, time.localtime(start))}"></label>'
            f'<label>to <input type="date" name="to" value="{time.strftime(day, time.localtime(end))}"></label>'
            '<button type="submit">Show</button></form>')
    accounts: dict[str, list[float]] = {}
    for r in rows:
        total = accounts.setdefault(r.account or "-", [0.0, 0.0, 0.0])
        total[0] += r.gpu_seconds
        total[1] += r.cpu_seconds
        total[2] += r.jobs
    by_user = _table(("User", "Account", "GPU hours", "CPU hours", "Jobs"),
                     [f"<tr><td>{e(r.user)}</td><td>{e(r.account or '-')}</td><td>{r.gpu_seconds / 3600:.2f}</td>"
                      f"<td>{r.cpu_seconds / 3600:.2f}</td><td>{r.jobs}</td></tr>" for r in rows], "usage")
    by_account = _table(("Account", "GPU hours", "CPU hours", "Jobs"),
                        [f"<tr><td>{e(a)}</td><td>{g / 3600:.2f}</td><td>{c / 3600:.2f}</td><td>{n:.0f}</td></tr>"
                         for a, (g, c, n) in sorted(accounts.items())])
    fair = _table(("Account", "User", "RawShares", "NormShares", "RawUsage", "EffectvUsage", "FairShare"),
                  [f"<tr><td>{e(s.account)}</td><td>{e(s.user)}</td><td>{s.raw_shares}</td><td>{s.norm_shares:.6f}</td>"
                   f"<td>{s.raw_usage:.0f}</td><td>{s.effective_usage:.6f}</td>"
                   f"<td>{'' if s.fairshare is None else f'{s.fairshare:.6f}'}</td></tr>" for s in shares])
    return layout(viewer, "Usage", form + "<h2>By user</h2>" + by_user + "<h2>By account</h2>" + by_account
                  + "<h2>Fair share</h2>" + fair, active="usage")


def error_page(viewer: Viewer, status: int, message: str) -> str:
    return layout(viewer, f"Error {status}", f'<p class="error" role="alert">{e(message)}</p>')
