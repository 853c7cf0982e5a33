"""The scripted model read from its file: every session's model reads the file again (so an edited
script plays its new turns), a check already made on the same bytes is not made again."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dsh_acp import ModelRequest, ScriptedModel, ScriptError, ScriptExhausted, TextDelta

pytestmark = pytest.mark.anyio


async def _texts(model: ScriptedModel) -> list[str]:
    events = [event async for event in model.stream(ModelRequest(messages=[], tools=[]))]
    return [event.text for event in events if isinstance(event, TextDelta)]


async def test_a_script_edited_between_sessions_plays_its_new_turns(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [[{"text": "first"}]]}))
    before = ScriptedModel.from_file(script)
    again = ScriptedModel.from_file(script)
    script.write_text(json.dumps({"turns": [[{"text": "other"}]]}))  # the same size: only the bytes differ
    after = ScriptedModel.from_file(script)
    assert await _texts(before) == await _texts(again) == ["first"]
    assert await _texts(after) == ["other"]


def test_a_script_edited_into_a_broken_one_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [[{"text": "fine"}]]}))
    ScriptedModel.from_file(script)
    script.write_text(json.dumps({"turns": [[{"text": 3}]]}))
    with pytest.raises(ScriptError, match=r"turns\[0\]\[0\]\.text must be a string"):
        ScriptedModel.from_file(script)
    script.unlink()
    with pytest.raises(ScriptError, match="cannot read script"):
        ScriptedModel.from_file(script)


async def test_a_task_plays_its_own_steps_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    tasks = {"t1": [{"text": "step one"}, {"text": "step two"}]}
    script.write_text(json.dumps({"turns": [[{"text": "turn"}]], "tasks": tasks}))
    model = ScriptedModel.from_file(script)
    again = ScriptedModel.from_file(script)  # the checked bytes: its tasks too

    async def texts(metadata: dict[str, object]) -> list[str]:
        request = ModelRequest(messages=[], tools=[], metadata=metadata)
        return [event.text async for event in again.stream(request) if isinstance(event, TextDelta)]

    assert await _texts(model) == ["turn"]
    assert await texts({"turn": 0, "step": 1, "task": "t1"}) == ["step two"]
    with pytest.raises(ScriptExhausted, match="has no task 't2'"):
        await texts({"turn": 0, "step": 0, "task": "t2"})
    with pytest.raises(ScriptExhausted, match="has no step 3 in task 't1'"):
        await texts({"turn": 0, "step": 2, "task": "t1"})
    script.write_text(json.dumps({"turns": [], "tasks": {"t1": [{"text": 3}]}}))
    with pytest.raises(ScriptError, match=r"tasks\['t1'\]\[0\]\.text must be a string"):
        ScriptedModel.from_file(script)
    script.write_text(json.dumps({"turns": [], "tasks": ["t1"]}))
    with pytest.raises(ScriptError, match='"tasks" must map task call ids to lists of steps'):
        ScriptedModel.from_file(script)
