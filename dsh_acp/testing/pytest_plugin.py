"""The pytest side of golden wire tests: ``pytest --update-golden`` rewrites goldens and prints
what changed.

Installed as a pytest plugin with dsh-acp (entry point ``dsh_acp``). A whole golden suite::

    import pytest
    from dsh_acp.testing import GoldenCheck, Scenario, discover_scenarios

    @pytest.mark.parametrize("scenario", discover_scenarios("fixtures/wire"), ids=str)
    def test_wire(scenario: Scenario, golden: GoldenCheck) -> None:
        golden(scenario)
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from ._golden_check import GoldenCheck
from ._schema import AcpSchema, locate_schema

__all__ = ["GoldenCheck", "acp_schema", "golden", "pytest_addoption", "pytest_terminal_summary"]

_DIFF = "dsh-acp golden diff"
"""The key a rewritten golden's diff is kept under in its test's report (``user_properties``):
reports reach the main process from pytest-xdist's workers, where module state would not."""


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.getgroup("dsh-acp").addoption(
        "--update-golden",
        action="store_true",
        default=False,
        help="rewrite golden wire transcripts (expected.jsonl) from this run and print what changed",
    )


@pytest.fixture(scope="session")
def acp_schema() -> AcpSchema:
    """The official ACP schema: ``$ACP_SCHEMA``, else the pinned version in the user cache, fetched
    with npm on first use (as ``dsh-acp schema fetch`` does); its absence fails the tests that need
    it, with what to run."""
    return AcpSchema(locate_schema(fetch=True))


@pytest.fixture
def golden(request: pytest.FixtureRequest, acp_schema: AcpSchema) -> Iterator[GoldenCheck]:
    """Check a scenario against its golden: ``golden(scenario)``."""
    check = GoldenCheck(update=bool(request.config.getoption("--update-golden")), schema=acp_schema)
    yield check
    request.node.user_properties.extend((_DIFF, diff) for diff in check.rewritten)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    diffs = [
        value
        for reports in terminalreporter.stats.values()
        for report in reports
        for key, value in getattr(report, "user_properties", ())
        if key == _DIFF and getattr(report, "when", "call") == "teardown"
    ]
    if diffs:
        terminalreporter.section("golden wire transcripts rewritten: read the diff before committing")
        for diff in diffs:
            terminalreporter.write(diff)
