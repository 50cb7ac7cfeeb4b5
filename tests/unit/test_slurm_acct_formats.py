"""psacctmgr, psshare, psreport and psdiag against what Slurm 22.05 printed for the same scenario
(tests/unit/slurm_22_05/acct/, recorded on the anchor cluster with slurmdbd): the lines of every
change, the listings snakemake and Open OnDemand parse, the headers and the tree."""

from __future__ import annotations

from pathlib import Path

import pytest

from pslurm.auth.credential import Identity
from pslurm.cli import psacctmgr, psdiag, psreport, psshare
from pslurm.cli.printfields import PARSABLE2, render
from pslurm.controller.assocs import AssocService
from pslurm.controller.priority import share_rows
from pslurm.controller.rest.acct_routes import assoc_json
from pslurm.controller.store import Store
from pslurm.core.acctmgr import AcctMgrError
from pslurm.core.config import parse_slurm_conf

REAL = Path(__file__).parent / "slurm_22_05" / "acct"
CLUSTER = {"name": "anchor", "control_host": "127.0.0.1", "control_port": 6817}


def real(name: str) -> tuple[list[str], int | None]:
    """A recorded output's lines and its exit status (None where not recorded)."""
    lines = (REAL / f"{name}.out").read_text().splitlines()
    if lines and lines[-1].startswith("rc="):
        return lines[:-1], int(lines[-1][3:])
    return lines, None


@pytest.fixture
def svc(tmp_path: Path) -> AssocService:
    store = Store(f"sqlite:///{tmp_path / 'pslurm.db'}")
    store.migrate()
    found = AssocService(store.assoc, "anchor")
    found.load_config(parse_slurm_conf("NodeName=c000 CPUs=4 RealMemory=1000\nPartitionName=p Nodes=c000\n"))
    return found


def sacctmgr(svc: AssocService, verb: str, entity: str, names: list[str], where: list[tuple[str, str]] = (),
             values: list[tuple[str, str]] = ()) -> list[str]:  # type: ignore[assignment]
    try:
        return svc.execute(Identity(0, 0), verb, entity, names, list(where), list(values), True)
    except AcctMgrError as exc:
        return exc.lines


def listing(svc: AssocService, entity: str, *words: str, header: bool = True, parsable: str = "") -> list[str]:
    model = psacctmgr.Model({**assoc_json(svc.current()), "cluster": CLUSTER})
    parsed = psacctmgr.Words(list(words))
    default, rows = psacctmgr.list_rows(model, entity, parsed)
    fields = [psacctmgr.lookup_field(item) for item in (parsed.format or default.split(","))]
    if parsed.tree:
        for f in fields:
            if f.header == "Account" and f.width == 10:
                f.width = -20
    return render(fields, ([row.get(f.header, "") for f in fields] for row in rows), header, parsable)


def test_sacctmgrs_changes_and_listings_match_slurm_line_for_line(svc: AssocService) -> None:
    steps = [
        ("add_account", "add", "account", ["zz_acct"], [],
         [("Description", "zz test"), ("Organization", "zzorg"), ("Fairshare", "2")]),
        ("add_subaccount", "add", "account", ["zz_sub"], [], [("Parent", "zz_acct")]),
        ("add_user", "add", "user", ["zz_user"], [], [("Account", "zz_acct")]),
        ("add_user2", "add", "user", ["zz_user"], [], [("Account", "zz_sub")]),
        ("add_account_again", "add", "account", ["zz_acct"], [], []),
    ]
    for name, verb, entity, names, where, values in steps:
        assert sacctmgr(svc, verb, entity, names, where, values) == real(name)[0], name
    assert listing(svc, "user", "zz_user", "withassoc", "format=account%256", header=False) == real("snakemake_user")[0]
    assert listing(svc, "user", "withassoc", "format=account,cluster,partition,qos", "where", "user=zz_user",
                   header=False, parsable=PARSABLE2) == real("ood_users")[0]
    for name, entity, words in (("list_account", "account", ["zz_acct"]), ("list_user", "user", ["zz_user"]),
                                ("list_user_withassoc", "user", ["zz_user", "withassoc"]),
                                ("list_account_withassoc", "account", ["zz_acct", "withassoc"]),
                                ("list_assoc_tree", "association", ["tree", "format=account,user,share"]),
                                ("list_assoc", "association", []), ("list_cluster", "cluster", []),
                                ("list_qos", "qos", [])):
        assert listing(svc, entity, *words) == real(name)[0], name
    steps = [
        ("modify_account", "modify", "account", ["zz_acct"], [], [("fairshare", "5")]),
        ("modify_account_desc", "modify", "account", ["zz_acct"], [], [("description", "changed")]),
        ("modify_user", "modify", "user", ["zz_user"], [], [("defaultaccount", "zz_sub")]),
        ("modify_user_assoc", "modify", "user", [], [("name", "zz_user"), ("account", "zz_acct")],
         [("maxjobs", "4")]),
        ("add_qos", "add", "qos", ["zz_qos"], [], [("priority", "10"), ("maxwall", "1:00:00")]),
        ("modify_qos", "modify", "qos", ["zz_qos"], [], [("priority", "20")]),
        ("delete_user_assoc", "delete", "user", ["zz_user"], [("account", "zz_sub")], []),
        ("delete_user", "delete", "user", ["zz_user"], [], []),
        ("delete_account", "delete", "account", ["zz_sub", "zz_acct"], [], []),
        ("delete_account_again", "delete", "account", ["zz_acct"], [], []),
        ("delete_qos", "delete", "qos", ["zz_qos"], [], []),
    ]
    for name, verb, entity, names, where, values in steps:
        assert sacctmgr(svc, verb, entity, names, where, values) == real(name)[0], name


def test_bad_fields_are_refused_in_slurms_words() -> None:
    with pytest.raises(ValueError) as exc:
        psacctmgr.lookup_field("nosuchfield")
    assert str(exc.value) == real("unknown_field")[0][0] and real("unknown_field")[1] == 1
    with pytest.raises(ValueError) as bad:
        psshare.fields_of("Nope")
    assert f"sshare: error: {bad.value}" == real("sshare_bad")[0][0]


def test_sshare_prints_slurms_header_and_tree(svc: AssocService) -> None:
    for verb, entity, names, values in (("add", "account", ["zz_acct"], [("Fairshare", "5")]),
                                        ("add", "account", ["zz_sub"], [("Parent", "zz_acct")]),
                                        ("add", "user", ["zz_user"], [("Account", "zz_acct")]),
                                        ("add", "user", ["zz_user"], [("Account", "zz_sub")])):
        sacctmgr(svc, verb, entity, names, [], values)
    import dataclasses

    shares = [dataclasses.asdict(r) for r in share_rows({}, (), svc.current())]
    fields = psshare.fields_of(psshare.SHORT)
    lines = render(fields, ([r[f.header] for f in fields] for r in psshare.rows(shares, "anchor", None, [], False)))
    recorded = real("sshare_a")[0]
    assert lines[:2] == recorded[:2]
    # the tree, its users and raw shares as Slurm's (the figures: pslurm's classic fair share, no usage here)
    assert [line[:42] for line in lines[2:]] == [line[:42] for line in recorded[2:]]
    assert lines[3][42:54] == recorded[3][42:54] and lines[4][42:54] == recorded[4][42:54]  # NormShares, depth 1


def test_sreport_and_sdiag_headers_are_slurms() -> None:
    data = {"assocs": [], "sizes": [], "cluster": {"name": "anchor", "nodes": 4, "cpus": 32, "gpus": 8,
                                                    "mem_mb": 1000}, "window": 86400}
    fields, _ = psreport.cluster_utilization(data, ("m", "Minutes"), ["cpu"], "Cl,al,d,planned,i,res,rep")
    assert render(fields, [])[0] == real("sreport_util")[0][4]
    fields, _ = psreport.cluster_utilization(data, ("m", "Minutes"), ["gres/gpu"], "Cl,TresName,al,d,planned,i,res,rep")
    assert render(fields, [])[0] == real("sreport_gpu")[0][4]
    fields, _ = psreport.top_usage(data, ("%", "Percentage of Total"), ["cpu"], "Cl,L,P,A,U,Energy", 10)
    assert render(fields, [])[0] == real("sreport_top")[0][4]
    fields, _ = psreport.account_by_user(data, ("m", "Minutes"), ["cpu"], "Cluster,Ac,Login,Proper,Used,Energy")
    assert render(fields, [])[0] == real("sreport_acct")[0][4]
    fields, _ = psreport.sizes_by_account({**data, "sizes": []}, ("m", "Minutes"), "Cl,a", [50, 250, 500, 1000])
    assert render(fields, [])[0] == real("sreport_sizes")[0][4]
    stats = {"req_time": 1795791509, "req_time_start": 1795791082, "server_thread_count": 3, "agent_queue_size": 0,
             "agent_count": 0, "agent_thread_count": 0, "dbd_agent_queue_size": 0, "jobs_submitted": 16,
             "jobs_started": 8, "jobs_completed": 3, "jobs_canceled": 1, "jobs_failed": 0,
             "job_states_ts": 1795791502, "jobs_pending": 7, "jobs_running": 4, "schedule_cycle_last": 18,
             "schedule_cycle_max": 1197, "schedule_cycle_total": 12, "schedule_cycle_mean": 198,
             "schedule_cycle_mean_depth": 0, "schedule_cycle_per_minute": 1, "schedule_queue_length": 0,
             "bf_backfilled_jobs": 0, "bf_last_backfilled_jobs": 0, "bf_backfilled_het_jobs": 0,
             "bf_cycle_counter": 0, "bf_when_last_cycle": 0, "bf_cycle_last": 0, "bf_cycle_max": 0,
             "bf_last_depth": 0, "bf_last_depth_try": 0, "bf_queue_len": 0, "bf_table_size": 0,
             "gettimeofday_latency": 0, "rpcs_by_message_type": [], "rpcs_by_user": []}
    lines = psdiag.report(stats)
    recorded = real("sdiag")[0]
    assert lines[4:29] == recorded[4:29]  # from the thread count to the backfill's last queue length


def test_sstat_prints_slurms_fields_and_units() -> None:
    from pslurm.cli import psstat

    fields = psstat.fields_of(psstat.STAT_FIELDS)
    assert render(fields, [])[0] == real("sstat_a")[0][0]  # every default field, its header and width
    # the batch step sstat measured on the anchor, as pslurm's agent would report it
    reply = {"display_id": "5", "nodes": [{"node": "c000", "gpus": [], "tasks": [
        {"step": "batch", "rank": 0, "pid": 1492, "pids": [1499, 1492], "cpu_seconds": 0.2, "rss_kb": 3084,
         "vmsize_kb": 5512, "pages": 0, "read_bytes": 11089, "write_bytes": 0}]}]}
    rows = psstat.step_rows(reply, None, True, True)
    wanted = psstat.fields_of("JobID,NTasks,MaxRSS,AveRSS,MaxVMSize,AveCPU,MinCPU,TRESUsageInTot,TRESUsageInMax")
    assert render(wanted, ([r.get(f.header) for f in wanted] for r in rows), parsable=PARSABLE2) == real("sstat_p")[0]
    pids = psstat.fields_of(psstat.PID_FIELDS)
    assert render(pids, ([r.get(f.header) for f in pids] for r in rows)) == real("sstat_i")[0][2:]
    assert psstat.step_rows(reply, None, False, True) == []  # no step named, no -a: no normal step, as sstat
