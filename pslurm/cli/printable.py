"""The one escaping of user text every command prints: a job's name, comment, paths, mail user,
submit line, a node's reason... A value can then neither move the cursor, clear the screen, nor
retitle a terminal, whatever its owner put in it.

Where it is applied, once for every field: the commands' table renderers (formats.render for
psqueue/psinfo/psprio, printfields.render for psacctmgr/psshare/psreport/psstat, psacct's own) and
``pscontrol show``'s records (scontrol_show._record). Escaping is idempotent on the output: an
escaped value holds only printable characters. Standard library only, for the commands' start.
"""

from __future__ import annotations

# C0 controls, DEL and C1 controls (0x9b is an 8-bit CSI to some terminals) as escapes
_CONTROL = {i: f"\\x{i:02x}" for i in (*range(32), *range(127, 160))} | {9: "\\t", 10: "\\n", 13: "\\r"}


def escaped(text: str) -> str:
    """``text`` with its control characters escaped (``\\n``, ``\\t``, ``\\x1b``, ``\\x9b``)."""
    return text.translate(_CONTROL) if any(ord(c) < 32 or 127 <= ord(c) < 160 for c in text) else text
