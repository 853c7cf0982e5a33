"""Every public module declares ``__all__``; every listed name exists; nothing private leaks."""

from __future__ import annotations

import importlib
import pkgutil
from types import ModuleType

import pytest

PACKAGES = ["dsh_tools", "dsh_acp", "reference_tools"]


def public_modules() -> list[str]:
    names: list[str] = []
    for package in PACKAGES:
        names.append(package)
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            if not any(part.startswith("_") for part in info.name.split(".")):
                names.append(info.name)
    return names


@pytest.mark.parametrize("name", public_modules())
def test_public_module_declares_all(name: str) -> None:
    module = importlib.import_module(name)
    exported = getattr(module, "__all__", None)
    assert exported is not None, f"{name} has no __all__"
    assert len(set(exported)) == len(exported), f"{name}.__all__ has duplicates"
    for attr in exported:
        assert not attr.startswith("_"), f"{name}.__all__ exports private {attr}"
        assert hasattr(module, attr), f"{name}.__all__ names missing {attr}"


@pytest.mark.parametrize("name", public_modules())
def test_no_undeclared_public_names(name: str) -> None:
    module = importlib.import_module(name)
    exported = set(getattr(module, "__all__", ()))
    for attr, value in vars(module).items():
        if attr.startswith("_") or attr in exported:
            continue
        # Submodules and `from __future__ import annotations` are not API.
        if isinstance(value, ModuleType) or attr == "annotations":
            continue
        # Only what the module itself defines: names it imports (for annotations, say) are not
        # offered as its API, whatever their spelling.
        owner = getattr(value, "__module__", None)
        assert owner != name, f"{name}.{attr} is defined here, public, but not in __all__"


def test_private_modules_declare_all() -> None:
    for package in PACKAGES:
        module = importlib.import_module(package)
        for info in pkgutil.walk_packages(module.__path__, prefix=f"{package}."):
            if info.name.endswith("__main__"):
                continue
            sub = importlib.import_module(info.name)
            assert hasattr(sub, "__all__"), f"{info.name} has no __all__"
