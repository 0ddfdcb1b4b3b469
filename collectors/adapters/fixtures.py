"""diag's own reference service: the same hooks as LightX2V's (the fixture mirrors its runner),
applied to every FixtureRunner instance."""

from __future__ import annotations

from types import ModuleType
from typing import TYPE_CHECKING

from .lightx2v import hook_runner_class

if TYPE_CHECKING:
    from ..protocol import Session


def install(session: Session, module: ModuleType) -> None:
    hook_runner_class(session, module.FixtureRunner, "diag.fixtures")
