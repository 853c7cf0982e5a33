"""The sandbox's policies, read without running anything: what a level and a widening grant,
the repository folders kept read-only, the secret stores hidden, the Seatbelt profile (macOS,
which cannot run here: its text is what is tested), and the reading of a refusal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from dsh_tools._seatbelt import SEATBELT, seatbelt_argv, seatbelt_profile
from dsh_tools.sandbox import CommandSandbox, SandboxPolicy, SandboxSupport, Widening, WideningError

LINUX = SandboxSupport("landlock", "test", 7)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    (home / ".ssh").mkdir(parents=True)
    (home / ".ssh" / "id_ed25519").write_text("KEY")
    (home / ".netrc").write_text("machine x password y")
    (home / ".config" / "dsh-acp").mkdir(parents=True)
    return home


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    workspace = tmp_path / "work"
    (workspace / ".git" / "hooks").mkdir(parents=True)
    (workspace / "src").mkdir()
    return workspace


def sandbox(workspace: Path, home: Path, *extra: Path) -> CommandSandbox:
    return CommandSandbox(
        LINUX,
        (str(workspace), *map(str, extra)),
        home=str(home),
        private_dirs=[str(home / ".config" / "dsh-acp")],
    )


def test_workspace_write_writes_only_in_the_roots_and_the_private_temp_folder(
    workspace: Path, home: Path
) -> None:
    box = sandbox(workspace, home)
    policy = box.policy("workspace-write")
    assert policy is not None
    assert policy.writable == (str(workspace), box.tmpdir())
    assert policy.readonly == (str(workspace / ".git"),)
    assert set(policy.hidden) == {str(home / ".ssh"), str(home / ".netrc"), str(home / ".config" / "dsh-acp")}
    assert not policy.network
    plan = policy.plan()
    assert plan["read"] == ["/"]
    assert plan["write"][:2] == [str(workspace), box.tmpdir()]
    assert plan["readonly"] == [str(workspace / ".git")]
    assert plan["network"] is False
    assert policy.environment({"PATH": "/bin"}) == {
        "PATH": "/bin",
        "TMPDIR": box.tmpdir(),
        "TMP": box.tmpdir(),
        "TEMP": box.tmpdir(),
    }
    tmpdir = box.tmpdir()
    assert os.stat(tmpdir).st_mode & 0o777 == 0o700
    box.close()
    assert not os.path.exists(tmpdir)


def test_read_only_writes_nowhere_but_the_temp_folder(workspace: Path, home: Path) -> None:
    box = sandbox(workspace, home)
    policy = box.policy("read-only")
    assert policy is not None
    assert policy.writable == (box.tmpdir(),)
    assert policy.readonly == ()  # .git is not inside anything writable: read-only as it is
    box.close()


def test_no_policy_without_a_sandbox_in_bypass_or_for_all(workspace: Path, home: Path) -> None:
    assert CommandSandbox(SandboxSupport("", "off"), (str(workspace),)).policy("workspace-write") is None
    box = sandbox(workspace, home)
    assert box.policy(None) is None
    assert box.policy("workspace-write", Widening(("all",))) is None


def test_widenings_are_read_to_what_the_kernel_can_grant(workspace: Path, home: Path, tmp_path: Path) -> None:
    box = sandbox(workspace, home)
    (tmp_path / "outside").mkdir()
    assert box.widening(None, str(workspace)) == Widening()
    assert box.widening(["network", "git", "network"], str(workspace)).tokens == ("git", "network")
    assert box.widening(["all", "network"], str(workspace)).tokens == ("all",)
    # A path that does not exist yet is granted as its nearest existing folder.
    assert box.widening(["../outside/new/dir"], str(workspace)).tokens == (str(tmp_path / "outside"),)
    # A path inside a secret store opens the store (a mount hides all of it or nothing).
    assert box.widening(["~/.ssh/known_hosts"], str(workspace)).tokens == (str(home / ".ssh"),)
    for bad in ("network,git", ["curl"], ["x/y"], [1], ["/a\0b"], ["network"] * 17):
        with pytest.raises(WideningError):
            box.widening(bad, str(workspace))


def test_widening_opens_what_it_names_and_nothing_else(workspace: Path, home: Path, tmp_path: Path) -> None:
    box = sandbox(workspace, home)
    outside = tmp_path / "outside"
    outside.mkdir()
    policy = box.policy("workspace-write", box.widening(["network", str(outside), "~/.ssh"], str(workspace)))
    assert policy is not None
    assert policy.network
    assert str(outside) in policy.writable
    assert str(home / ".ssh") in policy.writable
    assert str(home / ".ssh") not in policy.hidden
    assert str(home / ".netrc") in policy.hidden
    assert policy.readonly == (str(workspace / ".git"),)  # not widened with git
    git = box.policy("workspace-write", Widening(("git",)))
    assert git is not None
    assert git.readonly == ()
    assert not git.network
    assert Widening(("git", "network")).phrase() == "with network access and with write access to `.git`"
    assert Widening(("all",)).phrase() == "without the sandbox"
    assert Widening((str(outside),)).phrase() == f"with read and write access to `{outside}`"


def test_a_worktree_keeps_the_folders_its_git_file_names_read_only(tmp_path: Path, home: Path) -> None:
    main = tmp_path / "main"
    gitdir = main / ".git" / "worktrees" / "wt"
    gitdir.mkdir(parents=True)
    (gitdir / "commondir").write_text("../..\n")
    worktree = tmp_path / "wt"
    worktree.mkdir()
    (worktree / ".git").write_text(f"gitdir: {gitdir}\n")
    box = sandbox(worktree, home)
    policy = box.policy("workspace-write")
    assert policy is not None
    assert policy.git_dirs == (str(worktree / ".git"), str(gitdir), str(main / ".git"))
    assert policy.readonly == (str(worktree / ".git"),)  # the others are outside: read-only anyway
    widened = box.policy("workspace-write", Widening(("git",)))
    assert widened is not None
    assert {str(gitdir), str(main / ".git")} <= set(widened.writable)


def test_a_gitdir_inside_the_workspace_is_read_only_too(tmp_path: Path, home: Path) -> None:
    workspace = tmp_path / "ws"
    (workspace / "repo.git").mkdir(parents=True)
    (workspace / ".git").write_text("gitdir: repo.git\n")
    policy = sandbox(workspace, home).policy("workspace-write")
    assert policy is not None
    assert policy.readonly == (str(workspace / ".git"), str(workspace / "repo.git"))


def test_a_workspace_inside_a_secret_store_is_not_hidden_from_itself(home: Path) -> None:
    project = home / ".ssh" / "project"
    project.mkdir()
    policy = sandbox(project, home).policy("workspace-write")
    assert policy is not None
    assert str(home / ".ssh") not in policy.hidden


# -- macOS --------------------------------------------------------------------------------------


def _policy(**fields: object) -> SandboxPolicy:
    base: dict[str, object] = {
        "level": "workspace-write",
        "writable": ("/Users/me/work", "/private/var/folders/x/dsh-tmp-1"),
        "readonly": ("/Users/me/work/.git",),
        "git_dirs": ("/Users/me/work/.git",),
        "hidden": ("/Users/me/.ssh", "/Users/me/.netrc"),
        "network": False,
        "tmpdir": "/private/var/folders/x/dsh-tmp-1",
        "mechanism": "seatbelt",
    }
    base.update(fields)
    return SandboxPolicy(**base)  # type: ignore[arg-type]


def test_the_seatbelt_profile_denies_by_default_and_names_paths_only_as_parameters() -> None:
    text, params = seatbelt_profile(_policy())
    assert text.startswith("(version 1)\n(deny default)\n")
    assert "/Users" not in text  # every path is a parameter: no file name can change the profile
    assert params == {
        "HIDDEN_0": "/Users/me/.ssh",
        "HIDDEN_1": "/Users/me/.netrc",
        "WRITABLE_0": "/Users/me/work",
        "WRITABLE_1": "/private/var/folders/x/dsh-tmp-1",
        "READONLY_0": "/Users/me/work/.git",
    }
    hidden = '(require-any (subpath (param "HIDDEN_0")) (subpath (param "HIDDEN_1")))'
    assert f"(allow file-read* (require-not {hidden}))" in text
    writable = '(require-any (subpath (param "WRITABLE_0")) (subpath (param "WRITABLE_1")))'
    refused = (
        "(require-any "
        + " ".join(f'(subpath (param "{n}"))' for n in ("READONLY_0", "HIDDEN_0", "HIDDEN_1"))
        + ")"
    )
    assert f"(allow file-write* (require-all {writable} (require-not {refused})))" in text
    assert "network" not in text
    assert text.count("(") == text.count(")")


def test_the_seatbelt_profile_with_network_and_nothing_hidden() -> None:
    text, params = seatbelt_profile(_policy(network=True, hidden=(), readonly=()))
    assert "(allow file-read*)\n" in text
    assert "(allow network*)" in text
    assert '(global-name "com.apple.dnssd.service")' in text
    assert (
        '(allow file-write* (require-any (subpath (param "WRITABLE_0")) (subpath (param "WRITABLE_1"))))'
        in text
    )
    assert text.count("(") == text.count(")")
    assert set(params) == {"WRITABLE_0", "WRITABLE_1"}


def test_seatbelt_runs_the_command_through_sandbox_exec() -> None:
    policy = _policy()
    argv = policy.command(["bash", "-c", "make test"])
    text, params = seatbelt_profile(policy)
    assert argv[:3] == [SEATBELT, "-p", text]
    assert argv[-4:] == ["--", "bash", "-c", "make test"]
    assert argv[3:-4] == [part for name, path in params.items() for part in ("-D", f"{name}={path}")]
    assert argv == seatbelt_argv(policy, ["bash", "-c", "make test"])
    assert policy.spawn_plan() is None
    assert _policy(mechanism="landlock").command(["true"]) == ["true"]


# -- reading a refusal --------------------------------------------------------------------------


def test_refusals_are_read_against_the_policy(workspace: Path, home: Path, tmp_path: Path) -> None:
    box = sandbox(workspace, home)
    policy = box.policy("workspace-write")
    assert policy is not None
    cwd = str(workspace)
    git = policy.explain("error: could not lock config file .git/config: Read-only file system", cwd)
    assert git is not None
    assert f"`{workspace / '.git'}` is read-only" in git
    assert 'widen: ["git"]' in git
    outside = tmp_path / "outside"
    outside.mkdir()
    refused = policy.explain(f"touch: cannot touch '{outside}/x': Permission denied", cwd)
    assert refused is not None
    assert f"writing `{outside}/x` was refused" in refused
    assert f'widen: ["{outside}/x"]' in refused
    network = policy.explain("curl: (6) Could not resolve host: example.com", cwd)
    assert network is not None
    assert 'widen: ["network"]' in network
    hidden = policy.explain(f"cat: {home}/.ssh/id_ed25519: No such file or directory", cwd)
    assert hidden is not None
    assert "secret store" in hidden
    assert f'widen: ["{home / ".ssh"}"]' in hidden
    assert policy.explain("all good", cwd) is None
    # What the user could not have done either is not the sandbox's doing.
    assert policy.explain("cat: /etc/shadow-none: Permission denied", cwd) is None or os.access(
        "/etc", os.W_OK
    )
    assert policy.explain(f"cat: {workspace}/missing: No such file or directory", cwd) is None
    plan = box.policy("read-only")
    assert plan is not None
    said = plan.explain(f"touch: cannot touch '{workspace}/x': Read-only file system", cwd)
    assert said is not None
    assert "plan mode cannot widen" in said
    assert said.count("\n") == 0
