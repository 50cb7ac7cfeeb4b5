"""Regenerate the committed stubs: ``python -m pslurm.proto.generate``."""

from __future__ import annotations

import pathlib
import re
import sys


def generate(out_dir: pathlib.Path) -> None:
    """Write pslurm_pb2.py, pslurm_pb2.pyi and pslurm_pb2_grpc.py for pslurm.proto into out_dir."""
    from grpc_tools import protoc

    here = pathlib.Path(__file__).parent
    rc = protoc.main([
        "protoc", f"-I{here}", f"--python_out={out_dir}", f"--pyi_out={out_dir}",
        f"--grpc_python_out={out_dir}", str(here / "pslurm.proto"),
    ])
    if rc != 0:
        raise SystemExit(f"protoc failed with {rc}")
    # grpc's generator writes a top-level import; the stubs live inside a package.
    grpc_file = out_dir / "pslurm_pb2_grpc.py"
    text = re.sub(r"^import pslurm_pb2 as", "from pslurm.proto import pslurm_pb2 as",
                  grpc_file.read_text(), flags=re.M)
    grpc_file.write_text(text)


if __name__ == "__main__":
    generate(pathlib.Path(sys.argv[1]) if len(sys.argv) > 1 else pathlib.Path(__file__).parent)
