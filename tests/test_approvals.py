"""Remembered approvals mean what the card said: an adversarial corpus against the command-rule
matcher (in process, then through the real agent over stdio), the shell reader checked against
bash itself, path-scoped outside approvals, and old logs that never get broader on load."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections import deque
from pathlib import Path
from typing import Any

import anyio
import pytest
from approval_corpus import ATTACKS, COVERED

from dsh_acp.permissions._permission_choices import Question
from dsh_acp.permissions._rules import Rule, migrate_key, rule_from_json
from dsh_acp.permissions._shellwords import split_command_line
from dsh_acp.testing import AcpClient, AcpSchema
from dsh_tools import CommandSubject, PathSubject
from helpers import recorded
from reference_tools import default_tools, install_policies

pytestmark = pytest.mark.anyio
ROOT = "/w/project"
ZED = {"name": "zed", "version": "0.200.0"}
"""A client known to show permission options by name: it is offered the folder and project options."""


def _always(command: str, cwd: str = ROOT) -> tuple[Rule, ...]:
    """The rules the "Always allow" option of ``command``'s card remembers."""
    question = Question.of("bash", CommandSubject(command, cwd), (ROOT,))
    option = next(o for o in question.options([], project=False) if o.option_id == "allow_always")
    return option.remember


def _allowed(rules: tuple[Rule, ...], command: str, cwd: str = ROOT) -> bool:
    return Question.of("bash", CommandSubject(command, cwd), (ROOT,)).allowed_by(rules) is not None


def test_the_adversarial_corpus_never_matches(capsys: pytest.CaptureFixture[str]) -> None:
    tried, matched = 0, []
    for approved, attacks in ATTACKS.items():
        rules = _always(approved)
        assert _allowed(rules, approved), f"{approved!r} is not covered by its own rule"
        for attack in attacks:
            tried += 1
            if _allowed(rules, attack.replace("{X}", "/tmp/pwned")):
                matched.append((approved, attack))
    with capsys.disabled():
        print(f"\n[approval corpus] {tried} attack commands tried, {len(matched)} matched a rule")
    assert tried >= 150
    assert matched == []


@pytest.mark.parametrize("approved", sorted(COVERED))
def test_what_the_label_promises_is_covered(approved: str) -> None:
    rules = _always(approved)
    for later in COVERED[approved]:
        assert _allowed(rules, later), f"{later!r} should be covered after approving {approved!r}"


def test_labels_say_exactly_what_is_remembered() -> None:
    def labels(command: str) -> list[str]:
        question = Question.of("bash", CommandSubject(command, ROOT), (ROOT,))
        return [o.name for o in question.options([], project=True)]

    assert labels("git status -s") == [
        "Allow",
        "Always allow `git status` commands",
        "Always allow `git status` commands in this project",
        "Reject",
        "Always reject `git status` commands",
        "Always reject `git status` commands in this project",
    ]
    assert labels("python3 -m json.tool f")[1] == "Always allow exactly `python3 -m json.tool f`"
    assert labels("git status && npm test")[1] == "Always allow `git status` commands and `npm test` commands"
    assert labels("git status > out")[1] == "Always allow exactly this command line"
    # A command that runs elsewhere always asks: no "Always allow" is offered for it.
    elsewhere = Question.of("bash", CommandSubject("git status", "/elsewhere"), (ROOT,))
    assert [o.kind for o in elsewhere.options([], project=False)] == [
        "allow_once",
        "reject_once",
        "reject_always",
    ]
    assert elsewhere.notice == "Runs outside the workspace, in `/elsewhere`."


def test_compound_lines_run_only_when_every_part_is_allowed() -> None:
    rules = (*_always("git status"), *_always("npm test"))
    assert _allowed(rules, "git status && npm test")
    assert _allowed(rules, "npm test -- -x || git status --short")
    assert not _allowed(rules, "git status && npm publish")
    assert not _allowed(rules, "cd .. && git status")  # a part that moves the next one elsewhere
    # Rejecting a compound line rejects that line, not its parts everywhere.
    question = Question.of("bash", CommandSubject("git status && rm -rf x", ROOT), (ROOT,))
    reject = next(o for o in question.options([], project=False) if o.option_id == "reject_always")
    assert reject.remember == (Rule("bash", "line", text="git status && rm -rf x"),)
    # A remembered rejection of one command rejects any line that contains it.
    no_rm = Question.of("bash", CommandSubject("rm -rf build", ROOT), (ROOT,))._own
    assert Question.of("bash", CommandSubject("ls && rm -rf build", ROOT), (ROOT,)).rejected_by(no_rm)


def test_rules_keep_to_their_folder() -> None:
    rules = _always("git status")
    assert _allowed(rules, "git status", f"{ROOT}/sub")
    assert not _allowed(rules, "git status", "/w/project-other")
    assert not _allowed(rules, "git status", "/")


def _bash_words(line: str) -> list[list[str]]:
    """The word lists bash itself runs for ``line``: every program is a function printing its
    arguments to fd 3 in one write (so parts of a pipeline cannot interleave)."""
    parts = split_command_line(line) or []
    programs = sorted({words[0] for words in parts})
    body = 'local r; printf -v r \'%s\\037\' "$FUNCNAME" "$@"; printf \'%s\\036\' "$r" >&3; return 0'
    defs = "".join(f"{p}() {{ {body}; }}\n" for p in programs)
    run = subprocess.run(
        ["bash", "-c", f"exec 3>&1 1>/dev/null\n{defs}{line}"],
        capture_output=True,
        timeout=10,
        check=False,
        env={"PATH": os.environ.get("PATH", ""), "LC_ALL": "C"},
    )
    records = run.stdout.split(b"\36")[:-1]
    return [[w.decode() for w in record.split(b"\37")[:-1]] for record in records]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_the_reader_agrees_with_bash_on_everything_it_accepts() -> None:
    lines = {*ATTACKS, *(a for attacks in ATTACKS.values() for a in attacks), *COVERED}
    lines |= {c for covered in COVERED.values() for c in covered}
    checked = 0
    for line in sorted(lines):
        line = line.replace("{X}", "/tmp/pwned")
        parts = split_command_line(line)
        if parts is None or "||" in line:  # refused (it asks); `||` skips what follows a success
            continue
        if any(not words[0].replace("-", "_").replace(".", "_").isidentifier() for words in parts):
            continue  # bash cannot define a function named like that; such programs are exact-only
        expected = [list(words) for words in parts]
        actual = _bash_words(line)
        if "|" in line:
            expected, actual = sorted(expected), sorted(actual)  # a pipeline's parts run together
        assert actual == expected, line
        checked += 1
    assert checked > 60


def test_the_reader_refuses_what_it_does_not_understand() -> None:
    for line in [
        "a $(b)",
        "a `b`",
        "a > f",
        "a\nb",
        "a & b",
        "A=1 b",
        "a *",
        "a ~",
        "a {b,c}",
        "a \\b",
        "a 'b",
        "if a",
    ]:
        assert split_command_line(line) is None, line
    assert split_command_line("git commit -m 'a b' && npm test | tee -a x") == [
        ("git", "commit", "-m", "a b"),
        ("npm", "test"),
        ("tee", "-a", "x"),
    ]


def test_old_logs_never_get_broader() -> None:
    # "bash: git status" used to cover any command starting with it: it is now exactly that.
    old = migrate_key("bash: git status")
    assert old == Rule("bash", "exact", ("git", "status"))
    assert not _allowed((old,), "git status && touch x")
    assert not _allowed((old,), "git status --short")
    assert migrate_key("bash: git") == Rule("bash", "exact", ("git",))
    assert not _allowed((migrate_key("bash: git"),), "git -c core.fsmonitor=x status")  # type: ignore[arg-type]
    assert migrate_key("bash: echo 'unterminated") is None  # what cannot be read is dropped
    assert migrate_key("write") == Rule("write", "tool")  # covers only what the mode asks inside
    # A stored rule wider than the agent would make now is dropped, not trusted.
    assert rule_from_json({"tool": "bash", "kind": "prefix", "words": ["python3", "-c"]}) is None
    assert rule_from_json({"tool": "bash", "kind": "prefix", "words": ["git"]}) is None


def test_path_rules_cover_that_path_or_the_chosen_folder() -> None:
    def question(path: str, verb: str = "write") -> Question:
        return Question.of("write", PathSubject(verb, path, path), (ROOT,), f"{verb} {path}")

    options = {o.option_id: o for o in question("/out/a.txt").options([], project=False)}
    just_it, folder = options["allow_always"].remember, options["allow_always_folder"].remember
    assert options["allow_always_folder"].name == "Always allow writing in `/out/`"
    assert question("/out/a.txt").allowed_by(just_it)
    assert not question("/out/b.txt").allowed_by(just_it)
    assert not question("/out/a.txt", "read").allowed_by(just_it)
    assert question("/out/sub/b.txt").allowed_by(folder)
    assert not question("/outside/b.txt").allowed_by(folder)
    assert not question("/etc/passwd").allowed_by(folder)
    # A tool rule (the mode asked inside the workspace) never covers an outside path.
    assert not question("/out/a.txt").allowed_by((Rule("write", "tool"),))


# -- through the agent -------------------------------------------------------------------------


def _step(call_id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"tool_calls": [{"id": call_id, "name": name, "arguments": arguments}]}


async def test_outside_approvals_are_for_that_path(acp_schema: AcpSchema, tmp_path: Path) -> None:
    ws, out = tmp_path / "ws", tmp_path / "out"
    ws.mkdir()
    (out / "sub").mkdir(parents=True)
    for name in ("a.txt", "b.txt", "sub/c.txt"):
        (out / name).write_text(name + "\n")
    turns = [
        [
            _step("r1", "read", file_path=str(out / "a.txt")),  # asked: always, this file
            _step("r2", "read", file_path=str(out / "a.txt")),  # runs
            _step("r3", "read", file_path=str(out / "b.txt")),  # asked: always, this folder
            _step("r4", "read", file_path=str(out / "sub/c.txt")),  # runs
            _step("r5", "read", file_path="/etc/passwd"),  # asked: rejected
            _step("w1", "write", file_path=str(out / "new.txt"), content="x\n"),  # asked: rejected
            {"text": "done"},
        ]
    ]
    config, _ = recorded(turns, default_tools(), default_mode="default", state_dir=tmp_path / "state")
    config.configure_registry = install_policies
    answers = deque(["allow_always", "allow_always_folder", "reject_once", "reject_once"])
    async with AcpClient.in_memory(config, schema=acp_schema, permission_answers=answers) as client:
        await client.initialize(client_info=ZED)  # shows the folder option's name
        sid = await client.new_session(str(ws))
        await client.prompt(sid, "read around")
        asked = [r["params"]["toolCall"]["toolCallId"] for r in client.agent_requests]
    assert asked == ["r1", "r3", "r5", "w1"]
    assert not (out / "new.txt").exists()
    client.assert_valid()


def _markers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.glob("pwned*"))


def _approved_groups() -> dict[str, list[str]]:
    keys = ["git status", "git --version", "git -C . log -1", "ls -la", "python3 -m json.tool f"]
    return {key: ATTACKS[key] for key in keys}


async def _attack(
    acp_schema: AcpSchema, tmp_path: Path, approved: list[str], attacks: list[str]
) -> tuple[list[str], str]:
    """Through the real ``dsh-acp`` process, in a git repository ``tmp_path/ws``: each of
    ``approved`` answered "Always allow", then each attack answered "Reject" if it is asked
    about. The ids of the calls asked about (``c0``...) and everything the session showed."""
    ws = tmp_path / "ws"
    ws.mkdir()
    await anyio.run_process(["git", "init", "-q", str(ws)], check=False)
    calls = [*approved, *attacks]
    steps = [
        _step(f"c{i}", "bash", command=c, description="x", timeout_ms=20000) for i, c in enumerate(calls)
    ]
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [[*steps, {"text": "done"}]]}))
    answers = deque(["allow_always"] * len(approved) + ["reject_once"] * len(attacks))
    args = ["--model", f"script:{script}", "--mode", "default", "--max-model-requests", "500"]
    args += ["--state-dir", str(tmp_path / "state")]
    async with AcpClient.subprocess(
        args, schema=acp_schema, permission_answers=answers, cwd=str(ws)
    ) as client:
        await client.initialize()
        sid = await client.new_session(str(ws))
        await client.prompt(sid, "attack")
        asked = [r["params"]["toolCall"]["toolCallId"] for r in client.agent_requests]
        shown = json.dumps(client.updates(sid))
    client.assert_valid()
    return asked, shown


@pytest.mark.parametrize("approved", sorted(_approved_groups()))
async def test_attacks_through_the_real_agent_ask_and_leave_no_trace(
    approved: str, acp_schema: AcpSchema, tmp_path: Path
) -> None:
    """As an attacker-controlled model would: after one "Always allow", every attack command
    is sent through the real ``dsh-acp`` process; each must ask (the client rejects it)."""
    attacks = [
        a.replace("{X}", str(tmp_path / f"pwned-{i}")) for i, a in enumerate(_approved_groups()[approved])
    ]
    asked, _ = await _attack(acp_schema, tmp_path, [approved], attacks)
    assert asked == [f"c{i}" for i in range(1 + len(attacks))]  # every attack was asked about
    assert _markers(tmp_path) == []


# Each approved with "Always allow" first; then, as a prompt-injected model would, its siblings.
_SIBLINGS: dict[str, list[str]] = {
    "cargo clean": ["cargo clean --target-dir {X}", "cargo clean --target-dir=../outside"],
    "git archive HEAD": ["git archive -o {X} HEAD", "git archive -o{X} HEAD"],
    "git init": ["git init {X}"],
    "git worktree list": ["git worktree add {X}"],
    "git apply --check p.patch": ["git apply --unsafe-paths p.patch"],
    "ruff check": ["ruff check --fix {X}"],
    "git diff": ["git diff --no-index {SECRET} f"],
    "git commit -m fix": ["git commit -F {SECRET}", "git commit -F{SECRET}"],
    "git rebase main": ["git rebase -x 'touch {X}' main", "git rebase --exec='touch {X}' main"],
    "git bisect start": ["git bisect run touch {X}"],
    "git difftool": ["git difftool -x 'touch {X}'"],
    "git submodule status": ["git submodule foreach 'touch {X}'"],
    "git config --get user.name": ["git config core.fsmonitor 'touch {X}'"],
    "npm pkg get name": ["npm pkg set scripts.test='touch {X}'"],
}


@pytest.mark.slow
async def test_this_rounds_siblings_ask_through_the_real_agent(acp_schema: AcpSchema, tmp_path: Path) -> None:
    """The attacks of this round, through the real ``dsh-acp`` process: after each command is
    allowed always, its siblings (short options, runner subcommands, paths outside, a write after
    a read) must ask; the client rejects them, so no marker appears and no secret is read."""
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.txt"
    secret.write_text("the-secret-words\n")
    attacks = [
        attack.replace("{X}", str(tmp_path / f"pwned-{n}")).replace("{SECRET}", str(secret))
        for n, attack in enumerate(a for attacks in _SIBLINGS.values() for a in attacks)
    ]
    asked, shown = await _attack(acp_schema, tmp_path, list(_SIBLINGS), attacks)
    assert asked == [f"c{i}" for i in range(len(_SIBLINGS) + len(attacks))]  # every one was asked about
    assert _markers(tmp_path) == []
    assert "the-secret-words" not in shown


def test_rule_keys_match_what_a_command_does() -> None:
    # A group's action is part of the key: a read never covers a write of the same subcommand.
    assert _always("git config --get user.name") == (Rule("bash", "prefix", ("git", "config", "--get")),)
    assert _always("npm pkg get name") == (Rule("bash", "prefix", ("npm", "pkg", "get")),)
    assert _always("git stash") == (Rule("bash", "exact", ("git", "stash")),)  # stash alone pushes
    # Runner subcommands, arity-dependent ones and unknown programs are remembered exactly.
    for line in ["git bisect run make", "git difftool", "git branch", "aws s3 ls", "rake test", "yarn build"]:
        (rule,) = _always(line)
        assert rule.kind == "exact", line
    # A path outside the project makes the rule exact, also when it comes after `--`.
    assert _always("cargo clean --target-dir ../x") == (
        Rule("bash", "exact", ("cargo", "clean", "--target-dir", "../x")),
    )
    assert _always("git diff -- /etc/passwd")[0].kind == "exact"
    labels = Question.of("bash", CommandSubject("npm pkg get name", ROOT), (ROOT,)).options([], project=False)
    assert labels[1].name == "Always allow `npm pkg get` commands"


def test_paths_are_resolved_through_symbolic_links(tmp_path: Path) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    project.mkdir()
    elsewhere.mkdir()
    (project / "link").symlink_to(elsewhere)
    roots = (str(project),)

    def question(command: str) -> Question:
        return Question.of("bash", CommandSubject(command, str(project)), roots)

    always = next(
        o for o in question("cargo clean").options([], project=False) if o.option_id == "allow_always"
    )
    assert question("cargo clean --target-dir target").allowed_by(always.remember)
    assert not question("cargo clean --target-dir link/target").allowed_by(always.remember)
    assert not question(f"cargo clean --target-dir {elsewhere}").allowed_by(always.remember)


def test_a_rejection_covers_every_command_with_its_key() -> None:
    reject = Question.of("bash", CommandSubject("git push origin", ROOT), (ROOT,))._own
    assert reject == (Rule("bash", "prefix", ("git", "push")),)
    for line in ["git push --force", "git push --receive-pack=x origin", "git push ../outside/r"]:
        assert Question.of("bash", CommandSubject(line, ROOT), (ROOT,)).rejected_by(reject), line


def test_stored_rules_are_only_keys_the_agent_would_make() -> None:
    def stored(*words: str) -> Rule | None:
        return rule_from_json({"tool": "bash", "kind": "prefix", "words": list(words)})

    assert stored("git", "status") == Rule("bash", "prefix", ("git", "status"))
    assert stored("git", "config", "--get") is not None
    assert stored("git", "config") is None  # would cover writes
    assert stored("npm", "pkg") is None
    assert stored("git", "bisect") is None
    assert stored("brew", "install") is None  # an older, wider rule: dropped, never trusted


def test_corpus_size() -> None:
    assert sum(len(a) for a in ATTACKS.values()) >= 400
    assert sys.version_info >= (3, 11)


async def test_rules_survive_load_precisely_and_old_keys_get_narrower(
    acp_schema: AcpSchema, tmp_path: Path
) -> None:
    from dsh_acp.session._store import SessionStore

    ws, state = tmp_path / "ws", tmp_path / "state"
    ws.mkdir()
    turns = [
        [
            _step("a", "bash", command="git --no-pager version --build-options", description="v"),
            {"text": "1"},
        ],
        [
            _step("b", "bash", command="git --no-pager version --build-options", description="same"),
            _step("c", "bash", command="git --no-pager version", description="other"),
            _step("d", "bash", command="ls", description="old key, exactly"),
            _step("e", "bash", command="ls -la", description="old key, wider"),
            _step("f", "bash", command="ls && touch pwned", description="old key, compound"),
            {"text": "2"},
        ],
    ]
    config, _ = recorded(turns, default_tools(), default_mode="default", state_dir=state)
    async with AcpClient.in_memory(
        config, schema=acp_schema, permission_answers=deque(["allow_always"])
    ) as client:
        await client.initialize()
        sid = await client.new_session(str(ws))
        await client.prompt(sid, "first")
    # What an older agent logged: "bash: ls" used to cover every command starting with `ls`.
    log = SessionStore(state, clock=lambda: "2026-01-01T00:00:00Z").open(sid)
    log.write_record({"type": "permission", "rule": "allow", "key": "bash: ls"})  # format 1
    log.close()
    config2, _ = recorded(turns, default_tools(), default_mode="default", state_dir=state)
    answers = deque(["reject_once", "reject_once", "reject_once"])
    async with AcpClient.in_memory(config2, schema=acp_schema, permission_answers=answers) as client2:
        await client2.initialize()
        await client2.request("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
        await client2.prompt(sid, "second")
        asked = [r["params"]["toolCall"]["toolCallId"] for r in client2.agent_requests]
    assert asked == ["c", "e", "f"]
    assert not (ws / "pwned").exists()
    client.assert_valid()
    client2.assert_valid()


async def test_project_answers_are_private_and_removals_last(acp_schema: AcpSchema, tmp_path: Path) -> None:
    ws, state = tmp_path / "ws", tmp_path / "state"
    ws.mkdir()
    call = _step("a", "bash", command="git check-ref-format refs/heads/main", description="check")
    turns = [[call, {"text": "1"}], [], [], [call, {"text": "4"}]]
    config, _ = recorded(turns, default_tools(), default_mode="default", state_dir=state)
    answers = deque(["reject_always_project", "allow_always"])
    async with AcpClient.in_memory(config, schema=acp_schema, permission_answers=answers) as client:
        await client.initialize(client_info=ZED)  # shows the project option's name
        sid = await client.new_session(str(ws))
        await client.prompt(sid, "check")  # "Always reject ... in this project"
        (project_file,) = (state / "projects").iterdir()
        assert project_file.stat().st_mode & 0o777 == 0o600
        assert (state / "projects").stat().st_mode & 0o777 == 0o700
        assert "refs/heads" not in project_file.read_text()  # the rule, not the command line
        await client.prompt(sid, "/permissions")
        await client.prompt(sid, "/permissions remove 1")
        await client.prompt(sid, "check again")  # asks again: allow it always, for the session
        texts = [
            u["content"]["text"]
            for u in client.updates(sid)
            if u.get("sessionUpdate") == "agent_message_chunk"
        ]
    assert "1. Reject `git check-ref-format` commands (this project, `bash`)" in texts[1]
    assert texts[2].startswith("Removed: Reject `git check-ref-format` commands")
    assert [r["params"]["toolCall"]["toolCallId"] for r in client.agent_requests] == ["a", "a"]
    # The session's answer survives a load; its removal does too.
    turns2 = [[], [], [], [], [], []]
    config2, _ = recorded(turns2, default_tools(), default_mode="default", state_dir=state)
    async with AcpClient.in_memory(config2, schema=acp_schema) as client2:
        await client2.initialize()
        await client2.request("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
        await client2.prompt(sid, "/permissions")
        await client2.prompt(sid, "/permissions remove 1")
    config3, _ = recorded(turns2, default_tools(), default_mode="default", state_dir=state)
    async with AcpClient.in_memory(config3, schema=acp_schema) as client3:
        await client3.initialize()
        await client3.request("session/load", {"sessionId": sid, "cwd": str(ws), "mcpServers": []})
        await client3.prompt(sid, "/permissions")
        last = [u for u in client3.updates(sid) if u.get("sessionUpdate") == "agent_message_chunk"][-1]
    listed = [u for u in client2.updates(sid) if u.get("sessionUpdate") == "agent_message_chunk"]
    assert "1. Allow `git check-ref-format` commands (this session, `bash`)" in listed[-2]["content"]["text"]
    assert last["content"]["text"] == "No approvals are remembered for this session or this project."
