"""Pin the shout tool's wire output: every scenario under wire/ against its golden."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_acp.testing import Scenario, discover_scenarios
from dsh_acp.testing.pytest_plugin import GoldenCheck


@pytest.mark.parametrize("scenario", discover_scenarios(Path(__file__).parent / "wire"), ids=str)
def test_wire(scenario: Scenario, golden: GoldenCheck) -> None:
    golden(scenario)
