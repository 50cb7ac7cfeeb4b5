import re

import pytest

from pslurm.controller.admission import UNAVAILABLE, admit
from pslurm.core.config import parse_slurm_conf
from pslurm.core.gres import GresRequest
from pslurm.core.jobspec import JobSpec, SpecError

CONF = """
ClusterName=t
NodeName=c[000-001] CPUs=8 RealMemory=1000 Gres=gpu:a100:2
NodeName=c002 CPUs=4 RealMemory=1000 Gres=gpu:v100:1
PartitionName=gpu Nodes=c[000-002] Default=YES MaxTime=1:00:00 DefaultTime=10
PartitionName=small Nodes=c002 MaxTime=INFINITE
"""


@pytest.fixture
def config():
    return parse_slurm_conf(CONF)


def spec(**kw):
    return JobSpec(**{"name": "j", "user": "u", "uid": 1000, "gid": 1000, "workdir": "/tmp", "script": "#!/bin/sh\n",
                      **kw})


def test_default_partition_and_default_time(config):
    admitted = admit(spec(), config)
    assert (admitted.partition, admitted.time_limit) == ("gpu", 600)


def test_time_beyond_max_time_is_refused(config):
    with pytest.raises(SpecError, match="time limit"):
        admit(spec(time_limit=2 * 3600), config)


def test_unknown_partition(config):
    with pytest.raises(SpecError, match="invalid partition specified: nope"):
        admit(spec(partition="nope"), config)


@pytest.mark.parametrize("gres", [(GresRequest("gpu", None, 3),), (GresRequest("gpu", "h100", 1),),
                                  (GresRequest("gpu", "a100", 1), GresRequest("gpu", "v100", 1)),
                                  (GresRequest("fpga", None, 1),)])
def test_requests_no_node_can_ever_satisfy(config, gres):
    with pytest.raises(SpecError, match=UNAVAILABLE):
        admit(spec(gres=gres), config)


def test_typed_request_that_exists_is_accepted(config):
    assert admit(spec(gres=(GresRequest("gpu", "v100", 1),), partition="small"), config).partition == "small"


def test_too_many_cpus_or_memory(config):
    with pytest.raises(SpecError, match=UNAVAILABLE):
        admit(spec(cpus_per_task=9), config)
    with pytest.raises(SpecError, match=UNAVAILABLE):
        admit(spec(mem_mb=2000), config)


def test_nodelist_and_exclude_choose_the_nodes_a_job_may_use(config):
    assert admit(spec(nodelist="c001"), config).partition == "gpu"
    assert admit(spec(exclude="c[000-001]", gres=(GresRequest("gpu", "v100", 1),)), config).partition == "gpu"
    with pytest.raises(SpecError, match="^Invalid node name specified: c009$"):
        admit(spec(nodelist="c009"), config)
    with pytest.raises(SpecError, match="^Invalid node name specified: zz$"):
        admit(spec(exclude="zz"), config)
    with pytest.raises(SpecError, match="-w names 2 nodes"):
        admit(spec(nodelist="c[000-001]"), config)
    with pytest.raises(SpecError, match=f"^{UNAVAILABLE}$"):  # the only v100 node is excluded
        admit(spec(exclude="c002", gres=(GresRequest("gpu", "v100", 1),)), config)
    with pytest.raises(SpecError, match=f"^{UNAVAILABLE}$"):  # c000 is not in partition small
        admit(spec(partition="small", nodelist="c000"), config)
    with pytest.raises(SpecError, match=f"^{UNAVAILABLE}$"):  # required and excluded
        admit(spec(nodelist="c001", exclude="c001"), config)
    with pytest.raises(SpecError, match=r"^Invalid --nodelist specification: Invalid hostlist: c\[0-: "):
        admit(spec(nodelist="c[0-"), config)


# -- requests a raw gRPC client could send but the CLIs never would -------------------------------

@pytest.mark.parametrize("field, what", [
    ("name", "the job name"), ("user", "the user name"), ("workdir", "the working directory"),
    ("script", "the batch script"), ("partition", "the partition name"), ("stdout", "the output file name"),
    ("stderr", "the error file name"), ("account", "the account"), ("dependency", "the dependency"),
    ("array", "the array specification"), ("nodelist", r"the node list \(--nodelist\)"),
    ("exclude", r"the excluded node list \(--exclude\)"),
])
def test_a_nul_byte_in_any_text_is_refused(config, field, what):
    with pytest.raises(SpecError, match=f"^Invalid job request: {what} contains a NUL byte$"):
        admit(spec(**{field: "a\x00b"}), config)


@pytest.mark.parametrize("kw, what", [
    (dict(script=None, argv=("echo", "a\x00b")), "the command"),
    (dict(environment={"A\x00": "1"}), "the environment"),
    (dict(environment={"A": "1\x00"}), "the environment"),
    (dict(gres=(GresRequest("gpu\x00", None, 1),)), r"the generic resource \(gres\) request"),
    (dict(gres=(GresRequest("gpu", "a100\x00", 1),)), r"the generic resource \(gres\) request"),
])
def test_a_nul_byte_in_the_command_environment_or_gres_is_refused(config, kw, what):
    with pytest.raises(SpecError, match=f"^Invalid job request: {what} contains a NUL byte$"):
        admit(spec(**kw), config)


@pytest.mark.parametrize("gres, text", [
    ((GresRequest("gpu", None, -1),), "gpu:-1"),
    ((GresRequest("gpu", None, 0),), "gpu:0"),
    ((GresRequest("gpu", "a100", -2),), "gpu:a100:-2"),
    ((GresRequest("gpu", "a100", 1), GresRequest("gpu", None, -1)), "gpu:-1"),  # a negative one cannot offset
])
def test_zero_or_negative_gres_counts_are_refused(config, gres, text):
    with pytest.raises(SpecError, match=rf"^Invalid generic resource \(gres\) specification: {text}$"):
        admit(spec(gres=gres), config)


@pytest.mark.parametrize("kw, message", [
    (dict(num_nodes=0), "Node count specification invalid"),
    (dict(num_nodes=-1), "Node count specification invalid"),
    (dict(num_nodes=2**31), "Node count specification invalid"),
    (dict(ntasks=0), "Invalid task or CPU count specification"),
    (dict(ntasks=-1), "Invalid task or CPU count specification"),
    (dict(ntasks=2**31), "Invalid task or CPU count specification"),
    (dict(cpus_per_task=0), "Invalid task or CPU count specification"),
    (dict(cpus_per_task=2**70), "Invalid task or CPU count specification"),
    (dict(mem_mb=-1), "Invalid memory specification: -1"),
    (dict(mem_mb=2**53 + 1), f"Invalid memory specification: {2**53 + 1}"),
    (dict(time_limit=-1), r"Requested time limit is invalid \(missing or exceeds some limit\)"),
    (dict(time_limit=2**31), r"Requested time limit is invalid \(missing or exceeds some limit\)"),
])
def test_counts_and_sizes_out_of_range_are_refused(config, kw, message):
    with pytest.raises(SpecError, match=f"^{message}$"):
        admit(spec(**kw), config)


def test_time_limit_out_of_range_is_refused_even_without_enforced_partition_limits(config):
    with pytest.raises(SpecError, match="time limit is invalid"):
        admit(spec(time_limit=2**31), config, enforce_part_limits=False)
    assert admit(spec(time_limit=2 * 3600), config, enforce_part_limits=False).time_limit == 2 * 3600


@pytest.mark.parametrize("field, what, longest", [
    ("name", "the job name", 256), ("user", "the user name", 64), ("account", "the account", 64),
    ("partition", "the partition name", 64), ("dependency", "the dependency", 1024),
    ("nodelist", r"the node list \(--nodelist\)", 1024), ("exclude", r"the excluded node list \(--exclude\)", 1024),
])
def test_text_longer_than_the_store_holds_is_refused(config, field, what, longest):
    with pytest.raises(SpecError, match=f"^Invalid job request: {what} is longer than {longest} characters$"):
        admit(spec(**{field: "x" * (longest + 1)}), config)


def test_text_as_long_as_the_store_holds_is_accepted(config):
    assert admit(spec(name="x" * 256, user="u" * 64, account="a" * 64), config).partition == "gpu"


def test_a_gres_request_longer_than_the_store_holds_is_refused(config):
    gres = tuple(GresRequest("gpu", f"t{i:03d}", 1) for i in range(40))  # "gpu:t000:1,..." : 439 characters
    message = r"^Invalid generic resource \(gres\) specification: longer than 256 characters$"
    with pytest.raises(SpecError, match=message):
        admit(spec(gres=gres), config)


@pytest.mark.parametrize("kw,message", [
    ({"name": "a\nb"}, "the job name contains a line break"),
    ({"account": "x\ry"}, "the account contains a line break"),
    ({"script": ""}, "Batch script is empty!"),
    ({"script": "true\n"}, "This does not look like a batch script"),
    ({"script": "#!/bin/sh\r\ntrue\r\n"}, "DOS line breaks"),
    ({"script": "#!/bin/sh\n" + "#" * (4 * 1024 * 1024)}, "Batch script is too large"),
    ({"environment": {"BIG": "x" * (1024 * 1024)}}, "the environment is larger than 1048576 characters"),
])
def test_what_sbatch_would_refuse_is_refused_again_at_the_controller(config, kw, message):
    with pytest.raises(SpecError, match=re.escape(message)):
        admit(spec(**kw), config)
