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
    return JobSpec(name="j", user="u", uid=1000, gid=1000, workdir="/tmp", script="#!/bin/sh\n", **kw)


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
