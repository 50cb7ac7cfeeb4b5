"""``pscontrol token [lifespan=S] [username=U]``: scontrol token's JWT for slurmrestd's clients.

Prints ``SLURM_JWT=<token>`` as scontrol does; the controller signs it (``POST /pslurm/v1/token``,
auth/jwt.py). A word it does not take is scontrol's ``Invalid option: `WORD```; a refusal (another
user's token asked by a non-operator) is ``Error fetching token`` with the controller's reason.
"""

from __future__ import annotations

import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


def token(prog: str, words: Sequence[str]) -> None:
    """scontrol's _fetch_token: ``words`` are those after ``token``."""
    from pslurm.cli.common import connect_api
    from pslurm.client.errors import ClientError

    body: dict[str, object] = {}
    for word in words:
        key, _, value = word.partition("=")
        if key.lower() == "lifespan" and "=" in word:
            body["lifespan"] = int(value) if value.isdigit() else 0
        elif key.lower() == "username" and "=" in word:
            body["username"] = value
        else:
            print(f"Invalid option: `{word}`", file=sys.stderr)
            raise SystemExit(1)
    if body.get("lifespan") == 0:
        del body["lifespan"]  # scontrol's atoi: 0 is the default lifespan
    try:
        found = connect_api(prog).request("POST", "/pslurm/v1/token", body)
    except ClientError as exc:
        print(f"Error fetching token: {exc}", file=sys.stderr)
        raise SystemExit(1) from None
    print(f"SLURM_JWT={found['token']}")
