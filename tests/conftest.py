"""Shared test set-up: every test starts with a fresh Dynamo state."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

# Keep CPU tests within the 2-core budget and deterministic.
os.environ.setdefault("OMP_NUM_THREADS", "2")


@pytest.fixture(autouse=True)
def _fresh_dynamo() -> Iterator[None]:
    import torch

    torch._dynamo.reset()
    yield
    torch._dynamo.reset()
