"""A reply checked against the models generated from Slurm 25.11's OpenAPI spec (PyPI's ``slurmrestapi``).

The generated ``from_dict`` validates types (strict: an integer is no float, a string no number) and
required fields, but drops a field its model has not; :func:`check` also refuses such a field, at any
depth, so that a reply has the version's shapes exactly.
"""

from __future__ import annotations

import importlib
import inspect
import typing
from typing import Any

from pydantic import BaseModel


def model(version: str, name: str) -> type[BaseModel]:
    """The generated model ``name`` (``OpenapiJobInfoResp``) of ``version`` (``v0.0.42``)."""
    tag = "V" + version.replace("v", "").replace(".", "")
    snake = "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")
    module = importlib.import_module(f"slurmrestapi.models.{tag.lower()}_{snake}")
    found: type[BaseModel] = getattr(module, tag + name)
    return found


def _inner(annotation: Any) -> tuple[Any, bool]:
    """The model or type a field holds, and whether in a list."""
    if typing.get_origin(annotation) is typing.Union:
        annotation = next(a for a in typing.get_args(annotation) if a is not type(None))
    if typing.get_origin(annotation) in (list, typing.List):  # noqa: UP006 - the generated code's
        return typing.get_args(annotation)[0], True
    return annotation, False


def unknown_fields(cls: type[BaseModel], data: Any, path: str = "") -> list[str]:
    """The paths of the fields in ``data`` that ``cls`` (recursively) has not."""
    if not isinstance(data, dict):
        return []
    fields = {(f.alias or k): f for k, f in cls.model_fields.items()}
    out = []
    for key, value in data.items():
        field = fields.get(key)
        if field is None:
            out.append(f"{path}.{key}")
            continue
        inner, many = _inner(field.annotation)
        if inspect.isclass(inner) and issubclass(inner, BaseModel):
            for i, item in enumerate(value if many and isinstance(value, list) else [value]):
                out += unknown_fields(inner, item, f"{path}.{key}" + (f"[{i}]" if many else ""))
    return out


def check(version: str, name: str, data: dict[str, Any]) -> BaseModel:
    """``data`` parsed through the model (AssertionError naming any field the spec has not)."""
    cls = model(version, name)
    extra = unknown_fields(cls, data)
    assert not extra, f"{version} {name}: fields its spec has not: {extra[:10]}"
    parsed = cls.from_dict(data)
    assert parsed is not None
    return parsed
