"""Signals by Slurm's names (src/common/proc_args.c, signals_mapping): what --signal, scancel -s and
the API's ``kill_warning_signal`` take. Standard library only (``signal`` is imported when asked)."""

from __future__ import annotations

# The names Slurm knows, with or without SIG, in any case; any other signal by its number.
SIGNAL_NAMES = ("HUP", "INT", "QUIT", "ABRT", "KILL", "ALRM", "TERM", "USR1", "USR2", "URG", "CONT", "STOP", "TSTP",
                "TTIN", "TTOU", "XCPU")


def signal_number(text: str) -> int:
    """A signal by name (``USR1``, ``SIGUSR1``, ``usr1``: Slurm's names) or number (``10``); 0 when it
    is neither (Slurm's sig_name2num). A number must be a signal this system has."""
    import signal

    word = text.strip()
    if word.isdigit():
        number = int(word)
        return number if 0 < number < signal.NSIG else 0
    name = word.upper().removeprefix("SIG")
    return int(getattr(signal, f"SIG{name}")) if name in SIGNAL_NAMES else 0


def signal_name(number: int) -> str:
    """Slurm's name of a signal (sig_num2name): ``USR1`` for the names Slurm knows, else the number."""
    import signal

    for name in SIGNAL_NAMES:
        if int(getattr(signal, f"SIG{name}")) == number:
            return name
    return str(number)
