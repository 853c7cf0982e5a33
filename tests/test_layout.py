"""The layers contract and the README's "Layout" section cover every room and module there is:
a new room must be placed."""

from __future__ import annotations

import importlib
import pkgutil
import tomllib
from pathlib import Path

import dsh_acp

ROOT = Path(__file__).resolve().parent.parent
LAYERS_CONTRACT = "the rooms in layers: each imports only the rooms below it"


def _contracts() -> list[dict[str, object]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    contracts: list[dict[str, object]] = config["tool"]["importlinter"]["contracts"]
    return contracts


def _layers() -> list[set[str]]:
    (contract,) = [c for c in _contracts() if c["name"] == LAYERS_CONTRACT]
    layers = contract["layers"]
    assert isinstance(layers, list)
    return [{name.strip() for name in layer.replace("|", ":").split(":")} for layer in layers]


def _modules_of(package: str) -> set[str]:
    module = importlib.import_module(package)
    return {f"{package}.{info.name}" for info in pkgutil.iter_modules(module.__path__)}


def test_every_room_and_top_module_is_on_a_level() -> None:
    placed = set().union(*_layers())
    top = {name for name in _modules_of("dsh_acp") if name != "dsh_acp.__main__"}
    assert sorted(top - placed) == []


def test_the_layers_name_rooms_only() -> None:
    """A level is a room or a top module, never a module inside a room."""
    for name in set().union(*_layers()):
        assert name.count(".") == 1, name


def test_the_readme_layout_names_every_room() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    for name in sorted(_modules_of("dsh_acp")):
        tail = name.removeprefix("dsh_acp.")
        if tail == "__main__":
            continue
        room = f"{tail}/" if (Path(dsh_acp.__file__).parent / tail).is_dir() else f"{tail}.py"
        assert room in section, f"README Layout does not show {room}"


def test_no_contract_ignores_an_import() -> None:
    """A module placed on the wrong level is moved, not excused."""
    for contract in _contracts():
        assert contract.get("ignore_imports", []) == [], contract["name"]
