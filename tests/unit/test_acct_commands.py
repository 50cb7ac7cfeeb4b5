"""The accounting commands' formats, pure: Slurm's print_fields, sacctmgr's field names and defaults,
sshare's tree, sreport's units, seff's strings (issue 20)."""

from __future__ import annotations

import pytest

from pslurm.cli import psacctmgr, pseff, psreport, psshare
from pslurm.cli.printfields import PARSABLE, PARSABLE2, Field, render


def test_print_fields_pads_cuts_and_separates_as_slurm() -> None:
    fields = [Field("Account", -10), Field("Share", 5, number=True)]
    rows = [["averylongaccount", "123456"], ["lab", None]]
    assert render(fields, rows) == ["Account    Share ", "---------- ----- ", "averylong+ 123456 ",
                                    "lab              "]
    assert render(fields, rows, header=False, parsable=PARSABLE) == ["averylongaccount|123456|", "lab||"]
    assert render(fields, rows, parsable=PARSABLE2)[0] == "Account|Share"


def test_sacctmgr_reads_field_names_as_slurm_does() -> None:
    assert psacctmgr.lookup_field("account%256").header == "Account"
    assert psacctmgr.lookup_field("account%256").width == 256
    assert psacctmgr.lookup_field("DefaultA").header == "Def Acct"
    assert psacctmgr.lookup_field("MaxJobsPU").header == "MaxJobsPU"
    assert psacctmgr.lookup_field("Share").number
    with pytest.raises(ValueError, match="Unknown field 'Ac'"):
        psacctmgr.lookup_field("Ac")  # sacctmgr wants three letters of Account
    words = psacctmgr.Words(["root", "withassoc", "format=account,cluster", "where", "user=ana", "set", "fair=2"])
    assert (words.names, words.with_assoc, words.format) == (["root"], True, ["account", "cluster"])
    assert (words.where, words.set) == ([("user", "ana")], [("fair", "2")])


MODEL = psacctmgr.Model({
    "cluster": {"name": "lab", "control_host": "head", "control_port": 6817},
    "qos": [{"name": "normal", "description": "Normal QOS default", "priority": 0, "max_jobs_per_user": None,
             "max_submit_jobs_per_user": None, "max_tres_per_user": "", "max_wall": None, "preempt": []}],
    "accounts": [{"name": "root", "description": "default root account", "organization": "root"},
                 {"name": "lab1", "description": "lab one", "organization": "lab1"}],
    "users": [{"name": "ana", "default_account": "lab1", "admin_level": "None"},
              {"name": "root", "default_account": "root", "admin_level": "Administrator"}],
    "associations": [_a for _a in (
        {"account": "root", "user": "", "partition": "", "parent": "", "fairshare": 1, "id": 1},
        {"account": "root", "user": "root", "partition": "", "parent": "", "fairshare": 1, "id": 2},
        {"account": "lab1", "user": "", "partition": "", "parent": "root", "fairshare": 2, "id": 3},
        {"account": "lab1", "user": "ana", "partition": "", "parent": "", "fairshare": 1, "id": 4})
        if _a.update(max_jobs=None, max_submit_jobs=None, max_wall=None, grp_tres="", max_tres_per_job="",
                     qos=["normal"], default_qos="") is None],
})


def test_sacctmgr_lists_in_tree_order_with_its_defaults() -> None:
    fmt, rows = psacctmgr.list_rows(MODEL, "association", psacctmgr.Words([]))
    assert fmt.startswith("Cluster,Account,User,Part,Share")
    assert [(r["Account"], r["User"], r["Share"]) for r in rows] == [
        ("root", "", "1"), ("root", "root", "1"), ("lab1", "", "2"), ("lab1", "ana", "1")]
    fmt, rows = psacctmgr.list_rows(MODEL, "user", psacctmgr.Words(["ana"]))
    assert fmt == "U,DefaultA,Ad" and rows == [{**MODEL.assoc_row(MODEL.assocs[3]), "User": "ana",
                                                "Def Acct": "lab1", "Admin": "None"}]
    _, rows = psacctmgr.list_rows(MODEL, "account", psacctmgr.Words(["where", "parent=root", "withassoc"]))
    assert [r["Account"] for r in rows] == ["lab1", "lab1"]  # its own association and ana's
    _, rows = psacctmgr.list_rows(MODEL, "cluster", psacctmgr.Words([]))
    assert rows[0]["ControlHost"] == "head" and rows[0]["RPC"] == "9728"


def test_sshare_rows_indent_as_printed_and_filter_users() -> None:
    shares = [{"account": "root", "user": "root", "raw_shares": 1, "norm_shares": 1 / 3, "raw_usage": 0.0,
               "effective_usage": 0.0, "fairshare": 1.0, "parent": "root", "depth": 1, "assoc_id": 2},
              {"account": "lab1", "user": "", "raw_shares": 2, "norm_shares": 2 / 3, "raw_usage": 60.0,
               "effective_usage": 1.0, "fairshare": None, "parent": "", "depth": 1, "assoc_id": 3},
              {"account": "lab1", "user": "ana", "raw_shares": 1, "norm_shares": 2 / 3, "raw_usage": 60.0,
               "effective_usage": 1.0, "fairshare": 0.35, "parent": "lab1", "depth": 2, "assoc_id": 4}]
    rows = psshare.rows(shares, "lab", None, [], False)
    assert [(r["Account"], r["User"]) for r in rows] == [("root", None), (" root", "root"), (" lab1", None),
                                                         ("  lab1", "ana")]
    assert rows[0]["RawShares"] is None and rows[0]["RawUsage"] == "60" and rows[2]["NormShares"] == "0.666667"
    assert [r["Account"] for r in psshare.rows(shares, "lab", ["nobody"], ["lab1"], False)] == ["lab1"]
    assert [r["User"] for r in psshare.rows(shares, "lab", ["ana"], [], True)] == ["ana"]


def test_sreport_units_and_seffs_strings() -> None:
    assert psreport.time_value(7200, 14400, "m") == "120" and psreport.time_value(7200, 14400, "h") == "2"
    assert psreport.time_value(7200, 14400, "%") == "50.00%"
    assert psreport.time_value(7200, 14400, "h%") == "2(50.00%)"
    assert psreport.time_format("per") == ("%", "Percentage of Total")
    assert psreport.time_format("hourp") == ("h%", "Hours/Percentage of Total")
    with pytest.raises(ValueError):
        psreport.time_format("weeks")
    assert pseff.time2str(90061) == "1-01:01:01" and pseff.time2str(59) == "00:00:59"
    assert pseff.kbytes2str(0) == "0.00 MB" and pseff.kbytes2str(1536) == "1.50 MB"
    assert pseff.kbytes2str(3 * 1024 ** 2) == "3.00 GB" and pseff.kbytes2str(512) == "512.00 KB"


def test_sacctmgr_lists_an_association_with_the_max_limits_it_inherits() -> None:
    import copy

    data = copy.deepcopy({"cluster": MODEL.cluster, "qos": list(MODEL.qos.values()),
                          "accounts": list(MODEL.accounts.values()), "users": list(MODEL.users.values()),
                          "associations": MODEL.assocs})
    lab1 = data["associations"][2]
    lab1.update(max_wall=600, max_jobs=4, max_tres_per_job="gres/gpu=2", grp_tres="gres/gpu=1", default_qos="normal")
    data["associations"][3]["max_tres_per_job"] = "cpu=8"
    model = psacctmgr.Model(data)
    ana = model.assoc_row(model.assocs[3])
    assert (ana["MaxWall"], ana["MaxJobs"], ana["MaxTRES"], ana["Def QOS"]) == (
        "00:10:00", "4", "cpu=8,gres/gpu=2", "normal")  # slurmdbd's parent limits, a TRES limit per TRES
    assert ana["GrpTRES"] == ""  # a Grp limit is its association's own
    assert model.assoc_row(model.assocs[1])["MaxWall"] == ""  # root's user: nothing above it sets one
