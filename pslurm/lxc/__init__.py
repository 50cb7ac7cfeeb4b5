"""A virtual GPU cluster of LXC containers on one machine (``pslurm lxc up/down/status``).

- :mod:`pslurm.lxc.plan`: what to build (names, addresses, GPUs per node), a pure function of the options;
- :mod:`pslurm.lxc.render`: the Jinja2 templates under ``pslurm/templates/lxc`` rendered from a plan;
- :mod:`pslurm.lxc.host`: checks and changes on the host (bridge, fake device nodes, leftovers);
- :mod:`pslurm.lxc.bindings`: the python3-lxc module, found even from another CPython 3.11;
- :mod:`pslurm.lxc.cluster`: bring-up, tear-down and status, with a manifest of what was made.
"""
