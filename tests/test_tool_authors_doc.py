"""docs/tool-authors.md stays whole and true: the example it shows is the one the suite runs (and
fits in 40 lines), and it names every step and field of the scenario format and every field of
every card class."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import dsh_tools
from dsh_acp.testing._scenario_format import _FIELDS, _STEPS

ROOT = Path(__file__).parent.parent
DOC = (ROOT / "docs" / "tool-authors.md").read_text(encoding="utf-8")
EXAMPLE = ROOT / "examples" / "rename"
CARDS = [
    "Location",
    "FileDiff",
    "GenericCallView",
    "TerminalCallView",
    "DiffCallView",
    "PlanEntry",
    "PlanView",
    "GenericResultView",
    "TerminalResultView",
    "DiffResultView",
]


def test_the_example_is_shown_whole_and_fits_in_40_lines() -> None:
    files = [
        EXAMPLE / "rename.py",
        EXAMPLE / "test_rename.py",
        EXAMPLE / "wire" / "rename_word" / "scenario.json",
    ]
    for path in files:
        assert path.read_text(encoding="utf-8") in DOC, f"{path.name} differs from what the guide shows"
    assert sum(len(path.read_text().splitlines()) for path in files[:2]) <= 40


def test_the_readme_shows_the_same_example_whole() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("\n## Writing and testing a tool\n", 1)[1].split("\n## ", 1)[0]
    for path in [EXAMPLE / "rename.py", EXAMPLE / "test_rename.py"]:
        shown = f"```python\n{path.read_text(encoding='utf-8')}```"
        assert shown in section, f"the README's {path.name} differs"
    assert "](docs/tool-authors.md)" in section


def test_every_step_and_field_of_the_scenario_format_is_described() -> None:
    for field in _FIELDS:
        assert f"`{field}`" in DOC, field
    for step, fields in _STEPS.items():
        assert f'{{"{step}": ' in DOC, step
        for field in fields or ():
            assert f"`{field}`" in DOC, f"{step}.{field}"


@pytest.mark.parametrize("card", CARDS)
def test_every_card_field_is_described(card: str) -> None:
    row = re.search(rf"^\| `{card}` \| (.*) \|$", DOC, re.M)
    assert row is not None, card
    fields = [name for name in getattr(dsh_tools, card).model_fields if name != "card"]
    assert [name for name in fields if f"`{name}`" not in row.group(1)] == []
