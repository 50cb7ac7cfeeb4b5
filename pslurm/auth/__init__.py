"""Who sent a request: credentials signed with the cluster's key (MUNGE's idea; Slurm's auth/slurm).

The cluster has one secret key (``pslurm.key`` beside pslurm.conf, mode 0600, readable by the user
the daemons run as). A credential says "uid U, gid G, until T", signed with that key; every RPC
carries one and every server checks it. Whoever can read the key signs their own (the daemons,
and the owner of a personal ``pslurm up`` cluster); other users ask the controller's credential
socket, which signs for the uid and gid the kernel reports for the connecting process
(SO_PEERCRED), so nobody can claim to be somebody else. A server accepts each credential once
(its nonce is remembered until it expires), so one seen on the wire cannot be replayed; and the
daemons refuse to start while a secret (the key, the database URL) lies where others can read it.
"""
