"""A small training job for bench/gpu_packing.sh (the H200 packing figure of docs/benchmarks.md): a
3-layer MLP, batch 256, ``argv[1]`` steps (4000), a ballast of ``$BALLAST_MB`` (2048) MiB of GPU memory;
prints one JSON line (its job, CUDA_VISIBLE_DEVICES, CUDA start and training seconds)."""

import json
import os
import sys
import time

import torch

t0 = time.time()
steps = int(sys.argv[1]) if len(sys.argv) > 1 else 4000
dev = "cuda"
torch.manual_seed(0)
m = torch.nn.Sequential(torch.nn.Linear(512, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 1024), torch.nn.ReLU(),
                        torch.nn.Linear(1024, 10)).to(dev)
opt = torch.optim.SGD(m.parameters(), lr=0.01)
x = torch.randn(256, 512, device=dev)
y = torch.randint(0, 10, (256,), device=dev)
ballast = torch.empty(int(os.environ.get("BALLAST_MB", "2048")) * 2**20, dtype=torch.uint8, device=dev)
torch.cuda.synchronize()
t1 = time.time()
for _ in range(steps):
    opt.zero_grad(set_to_none=True)
    loss = torch.nn.functional.cross_entropy(m(x), y)
    loss.backward()
    opt.step()
torch.cuda.synchronize()
t2 = time.time()
print(json.dumps({"job": os.environ.get("SLURM_JOB_ID"), "cvd": os.environ.get("CUDA_VISIBLE_DEVICES"),
                  "init_s": round(t1 - t0, 2), "train_s": round(t2 - t1, 2), "steps": steps,
                  "loss": round(loss.item(), 4), "start": t0, "end": t2}))
