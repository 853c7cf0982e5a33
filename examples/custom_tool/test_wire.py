"""Pin the shout tool's wire output: every scenario under wire/ against its golden."""

from __future__ import annotations

from pathlib import Path

import pytest

from dsh_acp.testing import GoldenCheck, Scenario, discover_scenarios


@pytest.mark.parametrize("scenario", discover_scenarios(Path(__file__).parent / "wire"), ids=str)
def test_wire(scenario: Scenario, golden: GoldenCheck) -> None:
    golden(scenario)
