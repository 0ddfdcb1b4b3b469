"""diag.evidence.libraries: whose code a recorded path is, on the paths real recordings hold."""

from __future__ import annotations

import json
from pathlib import Path

import diffusers.hooks.group_offloading
import diffusers.models.transformers.transformer_wan
import torch._dynamo

from diag.evidence.libraries import DIFFUSERS, LIGHTX2V, MAGI, TORCH, library_of, library_path

DATA = Path(__file__).resolve().parent.parent / "data"


def _paths_in(folder: Path, part: str) -> set[str]:
    """Every recorded file path under `folder` that contains `part`."""
    found: set[str] = set()
    for events in folder.rglob("events.jsonl"):
        for line in events.read_text().splitlines():
            found.update(_strings(json.loads(line), part))
    return found


def _strings(value: object, part: str) -> list[str]:
    if isinstance(value, str):
        return [value] if part in value and value.endswith(".py") else []
    if isinstance(value, dict):
        return [s for v in value.values() for s in _strings(v, part)]
    if isinstance(value, list):
        return [s for v in value for s in _strings(v, part)]
    return []


def test_installed_packages_by_their_folder() -> None:
    assert library_of(diffusers.hooks.group_offloading.__file__) is DIFFUSERS
    # diffusers holds a folder named `transformers`: the package it sits in decides.
    assert library_of(diffusers.models.transformers.transformer_wan.__file__) is DIFFUSERS
    assert library_of(f"{torch._dynamo.__file__}:12") is TORCH


def test_a_checkout_run_from_its_repository() -> None:
    """LightX2V ran from its git checkout (tests/data/lightx2v), magi from a source folder."""
    lightx2v = _paths_in(DATA / "lightx2v", "/lightx2v/")
    assert lightx2v, "the LightX2V recordings name its files"
    assert {library_of(p) for p in lightx2v} == {LIGHTX2V}
    magi = _paths_in(DATA / "h200", "/magi_compiler/")
    assert magi and {library_of(p) for p in magi} == {MAGI}


def test_the_programs_own_code_is_no_library() -> None:
    assert library_of("/srv/app/pipeline.py:40") is None
    assert library_of("app.py") is None
    assert library_of("diffusers") is None  # a file named like a package is not inside it
    assert library_of(None) is None and library_of("") is None
    assert library_of("<frozen runpy>") is None
    # An unknown package after site-packages is not a known library, whatever folders above say.
    assert library_of("/home/u/torch/.venv/lib/python3.11/site-packages/numpy/core.py") is None


def test_library_path_starts_at_the_package() -> None:
    path = diffusers.hooks.group_offloading.__file__
    assert library_path(f"{path}:354") == "diffusers/hooks/group_offloading.py:354"
    assert library_path("/tmp/h6/LightX2V/lightx2v/common/x.py") == "lightx2v/common/x.py"
    assert library_path("/srv/app/pipeline.py:40") == "/srv/app/pipeline.py:40"
