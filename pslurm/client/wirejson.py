"""The API's JSON, read and written by CPython's ``_json`` accelerator alone.

``json.loads`` and ``json.dumps`` run this same C code, but ``import json`` imports ``json.decoder``
and ``json.encoder``, and both import :mod:`re` (and with it ``enum``, ``functools`` and
``collections``): the largest part of what a command imported beyond its own modules (docs/benchmarks.md).
The scanner and the encoder are made here as json makes them, with json's defaults; what differs is
only what json does in Python around them: bytes are read as UTF-8 (the API's encoding; json guesses
UTF-16 and -32 as well), and an error message is shorter (still a ValueError: a malformed reply's
``json.JSONDecodeError`` comes from the C scanner itself, which imports json then).
"""

from __future__ import annotations

import _json

TYPE_CHECKING = False  # typing costs a command milliseconds; mypy takes this name as typing's own
if TYPE_CHECKING:
    from typing import Any

_WHITESPACE = " \t\n\r"
_CONSTANTS = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}


class _Decoding:
    """What ``_json.make_scanner`` reads of a ``json.JSONDecoder``: json's defaults."""

    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = _CONSTANTS.__getitem__


_scan = _json.make_scanner(_Decoding())  # type: ignore[arg-type]  # typeshed wants a JSONDecoder: any object with its attributes will do


def _not_serializable(value: object) -> object:
    raise TypeError(f"Object of type {value.__class__.__name__} is not JSON serializable")


def _skip(text: str, at: int) -> int:
    """The index of the first character at or past ``at`` that is not JSON's whitespace."""
    end = len(text)
    while at < end and text[at] in _WHITESPACE:
        at += 1
    return at


def loads(data: bytes | bytearray | str) -> Any:
    """``json.loads(data)`` for a UTF-8 document (or text)."""
    text = data if isinstance(data, str) else data.decode("utf-8")
    try:
        value, end = _scan(text, _skip(text, 0))
    except StopIteration as stop:
        raise ValueError(f"Expecting value: char {stop.value}") from None
    if _skip(text, end) != len(text):
        raise ValueError(f"Extra data: char {end}")
    return value


def dumps(value: Any) -> str:
    """``json.dumps(value, separators=(",", ":"), ensure_ascii=False)``."""
    if isinstance(value, str):
        return str(_json.encode_basestring(value))
    # json's encoder for these arguments, made for each call as json makes it: markers (circular references
    # are refused), default, the string encoder, indent, key and item separators, sort_keys, skipkeys, allow_nan
    encode = _json.make_encoder({}, _not_serializable, _json.encode_basestring, None, ":", ",", False, False, True)
    return "".join(encode(value, 0))
