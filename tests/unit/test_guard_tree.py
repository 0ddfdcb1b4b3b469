# ruff: noqa: E501 - the guard tree is torch's own text, one guard a line
"""diag.trace.guards.guard_tree_locations on Dynamo's guard tree (the `dynamo_cpp_guards_str`
artifact): each guarded source gets the user line of the first guard installed under it. The
tree below is torch 2.13's text for a function reading `cfg.get("attention_scale")` of a dict
subclass (trimmed to the managers and guards that matter; the real recording is
test_guard_churn's config plant)."""

from __future__ import annotations

from diag.trace.guards import guard_tree_locations

TREE = """\
TREE_GUARD_MANAGER:
+- RootGuardManager
| +- GuardManager: source=L['x'], accessed_by=FrameLocalsGuardAccessor(key='x', framelocals_idx=0), type=<class 'torch.Tensor'>, tag_safe=(False, False)
| | +- TENSOR_MATCH: check_tensor(L['x'], Tensor, DispatchKeySet(CPU), torch.float32, device=None, requires_grad=False, size=[2], stride=[1])  # return x * read()  # app/g.py:8 in f
| +- GuardManager: source=G, accessed_by=GlobalsGuardAccessor, type=<class 'dict'>, tag_safe=(False, False)
| | +- DictGuardManager: source=G['cfg'], accessed_by=DictGetItemGuardAccessor('cfg'), type=<class '__main__.Cfg'>, tag_safe=(False, False)
| | | +- DICT_CONTAINS: not ___dict_contains('attention_scale', G['cfg'])             # return float(cfg.get("attention_scale", 1.0))  # app/g.py:5 in read
| | | | +- KeyManager: GuardManager: source=list(dict.keys(G['cfg']))[0], type=<class 'str'>, tag_safe=(False, False)
| | | | | +- EQUALS_MATCH: list(dict.keys(G['cfg']))[0] == 'a'                           # return float(cfg.get("attention_scale", 1.0))  # app/g.py:5 in read
| | +- GuardManager: source=G['__import_app_dot_state'], accessed_by=DictGetItemGuardAccessor('__import_app_dot_state'), type=<class 'module'>, tag_safe=(False, False)
| | | +- GuardManager: source=G['__import_app_dot_state'].MODE, accessed_by=GetAttrGuardAccessor(MODE), type=<class 'str'>, tag_safe=(False, False)
| | | | +- EQUALS_MATCH: G['__import_app_dot_state'].MODE == 'a'                     # if state.MODE == "a":  # app/g.py:9 in f
| +- GuardManager: source=L['self'], accessed_by=FrameLocalsGuardAccessor(key='self', framelocals_idx=1), type=<class 'Block'>, tag_safe=(False, False)
| | +- LAMBDA_GUARD: torch._functorch.aot_autograd.utils.top_saved_tensors_hooks ids == None  # _dynamo/output_graph.py:1135 in init_ambient_guards
"""


def test_each_source_gets_the_line_that_reads_it() -> None:
    found = guard_tree_locations(TREE)
    assert found["x"] == "app/g.py:8"
    assert found["cfg"] == "app/g.py:5"  # as a recompile reason writes it: len(G['cfg'])
    assert found["app.state.MODE"] == "app/g.py:9"  # module alias demangled
    assert "self" not in found  # only torch's own guard under it


def test_odd_text_gives_nothing() -> None:
    assert guard_tree_locations("") == {}
    assert guard_tree_locations("+- GuardManager: source=\n| +- X: y  # no location") == {}
