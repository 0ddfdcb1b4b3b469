"""diag.trace.guard_vocabulary: every guard kind of the installed torch is classified,
docs/GUARDS.md
is the table, and each verified fix names a harness family of its kind. Real failure texts,
from real compiles, are classified in tests/integration/test_guard_kinds_sample.py."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from diag.trace.guard_vocabulary import (
    BY_NAME,
    NOT_CHECKS,
    VOCABULARY,
    builders,
    render_markdown,
)
from diag.trace.guards import guard_check, parse_guard_failure

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "bench"))

from fidelity_kit.guard_kinds import BY_NAME as FAMILIES  # noqa: E402


def test_docs_are_the_table() -> None:
    docs = (ROOT / "docs" / "GUARDS.md").read_text(encoding="utf-8")
    assert docs == render_markdown(), "run: python -m diag.trace.guard_vocabulary > docs/GUARDS.md"


def _global_state_fields(torch: Any) -> list[str]:
    """GLOBAL_STATE's fields as the C++ guard serialises them (torch 2.6 serialises none)."""
    state = torch._C._dynamo.guards.GlobalStateGuard().__getstate__()
    return list(json.loads(state)) if isinstance(state, str) else []


def test_every_guard_builder_of_this_torch_is_classified() -> None:
    """A torch with a GuardBuilder method, a C++ leaf guard or a GLOBAL_STATE field the table
    lacks fails here, naming it."""
    torch = pytest.importorskip("torch")
    from torch._dynamo.guards import GuardBuilder

    cpp = torch._C._dynamo.guards
    names = {n for n, v in vars(GuardBuilder).items() if n.isupper() and callable(v)}
    names |= {
        n
        for n in dir(cpp)
        if isinstance(getattr(cpp, n), type) and issubclass(getattr(cpp, n), cpp.LeafGuard)
    }
    names |= set(_global_state_fields(torch))
    missing = sorted(names - builders() - NOT_CHECKS)
    assert not missing, f"guard kinds of torch {torch.__version__} not in the table: {missing}"


def test_every_global_state_field_has_its_own_kind() -> None:
    """GLOBAL_STATE's reason names the field that changed; each gets a kind, not the catch-all."""
    torch = pytest.importorskip("torch")
    state = _global_state_fields(torch)
    if not state:
        pytest.skip(f"torch {torch.__version__}'s GlobalStateGuard does not list its fields")
    texts = {f: f"0/0: GLOBAL_STATE changed: {f} " for f in state if f != "autocast_state"}
    texts["autocast_state"] = "0/0: GLOBAL_STATE changed: autocast(cpu)_enabled "
    vague = sorted(f for f, t in texts.items() if guard_check(t) == "global-state")
    assert not vague


@pytest.mark.parametrize(("name", "text"), [(c.name, e) for c in VOCABULARY for e in c.examples])
def test_examples_classify_as_their_kind(name: str, text: str) -> None:
    assert guard_check(text) == name
    assert parse_guard_failure(text).kind == BY_NAME[name].family


def test_verified_fixes_name_a_family_of_their_kind() -> None:
    for check in VOCABULARY:
        for fix in check.verified_fixes:
            family = FAMILIES.get(fix.verified_by or "")
            assert family is not None, (check.name, fix.verified_by)
            assert family.check == check.name, (check.name, family.name)


def test_every_family_has_a_verified_fix_in_the_table() -> None:
    verified = {f.verified_by for c in VOCABULARY for f in c.fixes}
    assert sorted(set(FAMILIES) - verified) == []


def test_advice_prints_verified_fixes_or_says_there_is_none() -> None:
    size01 = BY_NAME["tensor-size-0-1"].advice()
    assert size01.endswith("(verified)") and "mark_dynamic" not in size01
    device = BY_NAME["tensor-device"].advice()
    assert device.startswith("no verified fix for a tensor moved to another device; options:")
    assert BY_NAME["unknown"].advice() == "no fix known for a guard diag does not know"
