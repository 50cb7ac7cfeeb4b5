"""pslurm.client.wirejson reads and writes what json does, without importing it (nor re)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pslurm.client import wirejson

VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
                      lambda inner: st.lists(inner) | st.dictionaries(st.text(), inner), max_leaves=25)


@settings(max_examples=400)
@given(VALUES)
def test_the_same_text_and_values_as_json(value: object) -> None:
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    assert wirejson.dumps(value) == text
    assert json.dumps(wirejson.loads(text.encode())) == json.dumps(json.loads(text))  # NaN != NaN: compare texts
    assert json.dumps(wirejson.loads(f" \n{text}\r\n\t")) == json.dumps(json.loads(text))


@pytest.mark.parametrize("bad", [b"", b" ", b"{", b"[1,]", b"1 2", b"nul", b'{"a" 1}', b"\xff\xfe"])
def test_what_json_refuses_is_a_value_error(bad: bytes) -> None:
    with pytest.raises(ValueError):
        json.loads(bad)
    with pytest.raises(ValueError):
        wirejson.loads(bad)


def test_what_json_cannot_write_is_a_type_error_and_does_not_stick() -> None:
    with pytest.raises(TypeError, match="Object of type object is not JSON serializable"):
        wirejson.dumps({"a": [object()]})
    shared = [1]
    assert wirejson.dumps({"x": shared, "y": shared}) == '{"x":[1],"y":[1]}'  # no circular reference left marked


def test_it_imports_neither_json_nor_re() -> None:
    code = "import sys, pslurm.client.wirejson as w; w.loads(w.dumps({'a': [1]})); print(sorted(m for m in " \
           "('json', 're', 'enum') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True, check=True, timeout=60,
                         env={"PYTHONPATH": ":".join(p for p in sys.path if p)})
    assert out.stdout.strip() == "[]"
