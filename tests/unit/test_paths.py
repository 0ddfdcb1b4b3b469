"""One rule for every path diag shows: relative to the repository diag runs in, else absolute."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from diag.trace import paths
from diag.trace.paths import shown_location, shown_path


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "repo"
    (root / ".git").mkdir(parents=True)
    (root / "sub" / "deeper").mkdir(parents=True)
    monkeypatch.delenv("GITHUB_WORKSPACE", raising=False)
    paths.repository_root.cache_clear()
    yield root
    paths.repository_root.cache_clear()


def test_paths_inside_the_repository_are_relative_to_its_root(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = str(repo / "sub" / "model.py")
    for where in (repo, repo / "sub" / "deeper"):  # check run from the root or a subfolder
        monkeypatch.chdir(where)
        paths.repository_root.cache_clear()
        assert shown_path(model) == os.path.join("sub", "model.py")
        assert shown_location(f"{model}:78") == "sub/model.py:78"


def test_a_relative_recorded_path_is_read_from_the_recording_folder(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    # Recorded from repo/sub, where the program named its file `model.py`.
    assert shown_location("model.py:3", recorded_cwd=str(repo / "sub")) == "sub/model.py:3"


def test_paths_outside_stay_absolute_and_names_stay_names(
    repo: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(repo)
    outside = str(tmp_path / "elsewhere" / "lib.py")
    assert shown_location(f"{outside}:5") == f"{outside}:5"
    assert shown_location("wan_block_forward") == "wan_block_forward"


def test_github_workspace_is_the_root_in_actions(
    repo: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_WORKSPACE", str(repo / "sub"))
    monkeypatch.chdir(repo / "sub" / "deeper")
    assert shown_location(str(repo / "sub" / "model.py") + ":1") == "model.py:1"
