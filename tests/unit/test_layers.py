"""Every module of pslurm.controller is in a layer of the controller's layers contract (pyproject.toml).

import-linter checks only the modules a layers contract names: one left out may import any layer, and
any layer may import it. So a new controller module takes its place in the contract with its first
commit, and a name the contract keeps for a module gone is dropped with it."""

from __future__ import annotations

import pkgutil
import re
import tomllib
from pathlib import Path

import pslurm.controller

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def contract_layers(container: str) -> list[set[str]]:
    """The layers contract of ``container`` in pyproject.toml: each layer's module names, top to bottom
    (siblings split on ``|`` and ``:``)."""
    contracts = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["importlinter"]["contracts"]
    for contract in contracts:
        if contract["type"] == "layers" and contract.get("containers") == [container]:
            return [{name.strip("()") for name in re.split(r"[\s:|]+", layer) if name} for layer in contract["layers"]]
    raise AssertionError(f"pyproject.toml has no layers contract for {container}")


def unlayered(modules: set[str], layers: list[set[str]]) -> tuple[set[str], set[str]]:
    """The modules in no layer, and the layers' names that are no module."""
    named = set().union(*layers)
    return modules - named, named - modules


def test_every_controller_module_is_in_a_layer() -> None:
    modules = {m.name for m in pkgutil.iter_modules(pslurm.controller.__path__)}
    missing, stale = unlayered(modules, contract_layers("pslurm.controller"))
    assert not missing, (f"pslurm.controller modules in no layer of the controller's contract (pyproject.toml): "
                         f"{sorted(missing)}: put each where its imports place it")
    assert not stale, f"the controller's layers name modules that are gone: {sorted(stale)}"


def test_a_layer_is_read_into_its_module_names() -> None:
    layers = [{"app"}, {"rest", "servicer"}, {"store", "agents"}]
    assert unlayered({"app", "rest", "servicer", "store", "agents", "limits"}, layers) == ({"limits"}, set())
    assert unlayered({"app", "rest", "servicer", "store"}, layers) == (set(), {"agents"})
    assert {"ports", "errors"} in contract_layers("pslurm.controller")  # "ports : errors", split as written
