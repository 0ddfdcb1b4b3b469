"""Which failing guards say an entry was compiled for another module
(diag.evidence.causes.other_module).

The texts are torch's own, copied from recordings of the fidelity sample (s1 seed): torch 2.13 on
this machine, and torch 2.11 on the H200 host's CPUs where marked (its s1-110-sd3 printed the
KeyError on `attn._modules` and the type guard on `norm1_context`; s1-146-sd3 and others the
KeyError on `self._modules`). The end-to-end check on a real compile is
tests/integration/test_limit_shared_code.py.
"""

from __future__ import annotations

import pytest

from diag.evidence.causes import other_module
from diag.trace.guards import parse_guard_failure
from diag.trace.run import Guard


def _guard(text: str) -> Guard:
    parsed = parse_guard_failure(text)
    return Guard(
        kind=parsed.kind,
        source=parsed.source,
        expected=parsed.expected,
        actual=parsed.actual,
        raw=parsed.raw,
        compile_id=parsed.compile_id,
    )


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (
            "0/0: KeyError on self._modules['attn']._modules['to_add_out']",
            "compiled for a module whose self._modules['attn'] has the submodule 'to_add_out' "
            "(the call's has not)",
        ),
        (
            "0/0: KeyError on self._modules['attn2']",
            "compiled for a module whose self has the submodule 'attn2' (the call's has not)",
        ),
        (  # torch 2.11: a processor's frame, whose `attn` argument is the module
            "5/0: KeyError on attn._modules['to_add_out']",
            "compiled for a module whose attn has the submodule 'to_add_out' (the call's has not)",
        ),
        (  # torch 2.11: the last block's norm1_context is an AdaLayerNormContinuous
            "0/0: ___check_type_id(self._modules['norm1_context'], 991942912), "
            "type=<class 'diffusers.models.normalization.AdaLayerNormZero'>  "
            "# norm_encoder_hidden_states, c_gate_msa, c_shift_mlp, c_scale_mlp, c_gate_mlp = "
            "self.norm1_context(  # mp/site/diffusers/models/attention.py:699 in forward "
            "(HINT: type AdaLayerNormZero)",
            "compiled for a module whose self._modules['norm1_context'] is of another type "
            "(<class 'diffusers.models.normalization.AdaLayerNormZero'>)",
        ),
        (  # a processor class per attention kind (s1-069-sana): `self` need not be a module
            "12/0: ___check_type_id(self, 93962040987456), "
            "type=<class '__main__.planted_processor.<locals>.Planted'>  "
            "# return super().__call__(attn, hidden_states, *args, **kwargs)  "
            "# program.py:60 in torch_dynamo_resume_in___call___at_59",
            "compiled for a `self` of another type "
            "(<class '__main__.planted_processor.<locals>.Planted'>)",
        ),
        (  # a subclass that inherits forward: one code object for both module classes
            "1/0: ___check_type_id(self, 94024321775872), type=<class '__main__.M'>  "
            "# def forward(self, x): return self.lin(x)  # mp/ke/idm2.py:14 in forward "
            "(HINT: type M)",
            "compiled for a `self` of another type (<class '__main__.M'>)",
        ),
    ],
)
def test_a_guard_on_the_module_itself_rules_its_entry_out(text: str, says: str) -> None:
    assert other_module(_guard(text)) == says


@pytest.mark.parametrize(
    "text",
    [
        # A tuple argument of another type (s1-018-wan): the call's own value, a possible cause.
        "1/0: ___check_type_id(rotary_emb, 139678838023040), type=<class 'tuple'>",
        # An attribute of a submodule, a key of a dict that is not a module's: values that may
        # change on one module, so their entries may still be the call's. (The KeyError is
        # written in the form torch prints for any missing key, not copied from a run.)
        "0/1: self._modules['attn'].context_pre_only == True",
        "0/0: KeyError on L['kwargs']['joint_attention_kwargs']",
        "0/0: G['__import___main__'].ATTN_CONFIG['impl'] == 'sdpa'",
        "0/0: tensor 'hidden_states' size mismatch at index 1. expected 64, actual 128",
    ],
)
def test_other_guards_do_not(text: str) -> None:
    assert other_module(_guard(text)) is None
