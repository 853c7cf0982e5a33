"""``GoldenCheck``: what the kit's ``golden`` pytest fixture is, and what a test annotates it with;
``golden_tests``: a whole golden test in one line."""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from ._scenario import Mode, Scenario, ScenarioError, check_scenario, discover_scenarios
from ._schema import AcpSchema

__all__ = ["GoldenCheck", "golden_tests"]


@dataclass(frozen=True)
class GoldenCheck:
    """Runs a scenario and compares it with its golden (with ``pytest --update-golden``, writes
    the golden instead): ``golden(scenario)``.

    A difference, a scenario that cannot be read, a missing golden or an agent that would not
    start fails the test with that alone, in words, without a traceback of the kit. By default
    the golden leaves out what describes dsh-acp itself (its version, capabilities, modes and
    commands: see ``Normalizer``), so that it survives an upgrade; ``pin_agent=True`` keeps them.
    """

    update: bool
    schema: AcpSchema
    rewritten: list[str] = field(default_factory=list, compare=False)
    """The diffs of the goldens this check wrote (shown at the end of the run)."""

    def __call__(self, scenario: Scenario, mode: Mode = "subprocess", *, pin_agent: bool = False) -> None:
        import pytest  # the kit's pytest side: only a test calls this

        failure: str | None = None
        diff: str | None = None
        try:
            diff = check_scenario(
                scenario, update=self.update, mode=mode, schema=self.schema, pin_agent=pin_agent
            )
        except (AssertionError, ScenarioError) as error:
            failure = str(error)
        if failure is not None:  # outside the handler: the report is the message, not a chain
            pytest.fail(failure, pytrace=False)
        if diff:
            self.rewritten.append(f"scenario {scenario.name}: {diff}")


def golden_tests(
    folder: str | Path, *, mode: Mode = "subprocess", pin_agent: bool = False
) -> Callable[[Scenario, GoldenCheck], None]:
    """A test of every scenario in ``folder`` against its golden, one case per scenario:
    ``test_wire = golden_tests("wire")`` in a test module. A relative ``folder`` is read beside
    the module that calls this (its ``__file__``). ``mode`` and ``pin_agent``: see ``GoldenCheck``."""
    import pytest  # the testing extra: see GoldenCheck

    folder = Path(folder)
    if not folder.is_absolute():
        caller = sys._getframe(1).f_globals.get("__file__")
        folder = (Path(caller).parent if caller else Path.cwd()) / folder

    @pytest.mark.parametrize("scenario", discover_scenarios(folder), ids=str)
    def test(scenario: Scenario, golden: GoldenCheck) -> None:
        golden(scenario, mode, pin_agent=pin_agent)

    return test
