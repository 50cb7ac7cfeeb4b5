"""The node agent, psd: registers its node and GPUs, runs the jobs it is sent."""
