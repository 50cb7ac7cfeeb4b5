"""The committed gRPC stubs are what pslurm.proto generates today."""

from pathlib import Path

import pytest

from pslurm.proto.generate import generate

HERE = Path(__file__).resolve().parents[2] / "pslurm" / "proto"


@pytest.mark.parametrize("name", ["pslurm_pb2.py", "pslurm_pb2.pyi", "pslurm_pb2_grpc.py"])
def test_stubs_are_fresh(tmp_path, name):
    generate(tmp_path)
    assert (tmp_path / name).read_text() == (HERE / name).read_text(), \
        "stale stubs: run python -m pslurm.proto.generate"
