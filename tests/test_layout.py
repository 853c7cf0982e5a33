"""The layers contract and the README's "Layout" section cover every room and module there is:
a new room, or a new module of the acp room (whose two halves sit at two levels), must be placed."""

from __future__ import annotations

import importlib
import pkgutil
import tomllib
from pathlib import Path

import dsh_acp

ROOT = Path(__file__).resolve().parent.parent
LAYERS_CONTRACT = "the rooms in layers: each imports only the rooms below it"


def _layers() -> list[set[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["name"] == LAYERS_CONTRACT]
    return [{name.strip() for name in layer.replace("|", ":").split(":")} for layer in contract["layers"]]


def _modules_of(package: str) -> set[str]:
    module = importlib.import_module(package)
    return {f"{package}.{info.name}" for info in pkgutil.iter_modules(module.__path__)}


def test_every_room_and_top_module_is_on_a_level() -> None:
    placed = set().union(*_layers())
    top = {name for name in _modules_of("dsh_acp") if name != "dsh_acp.__main__"}
    assert sorted(top - placed - {"dsh_acp.acp"}) == []


def test_every_acp_module_is_on_one_of_the_two_acp_levels() -> None:
    placed = [layer for layer in _layers() if any(name.startswith("dsh_acp.acp.") for name in layer)]
    assert len(placed) == 2  # the method handlers, the wire shapes
    assert sorted(_modules_of("dsh_acp.acp") - placed[0] - placed[1]) == []


def test_the_readme_layout_names_every_room() -> None:
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Layout", 1)[1].split("\n## ", 1)[0]
    for name in sorted(_modules_of("dsh_acp")):
        tail = name.removeprefix("dsh_acp.")
        if tail == "__main__":
            continue
        room = f"{tail}/" if (Path(dsh_acp.__file__).parent / tail).is_dir() else f"{tail}.py"
        assert room in section, f"README Layout does not show {room}"


def test_the_layers_hold_without_exceptions() -> None:
    """A module placed on the wrong level is moved, not excused: the layers contract ignores nothing."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    (contract,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["name"] == LAYERS_CONTRACT]
    assert contract.get("ignore_imports", []) == []
