from __future__ import annotations

import pytest

from diag.record.profilespec import ProfileSpec, ProfileSpecError, parse_profile_spec


def test_default_and_none() -> None:
    assert parse_profile_spec("default") == ProfileSpec(new_shapes=True, steady=2)
    assert parse_profile_spec("") == parse_profile_spec("default")
    assert not parse_profile_spec("none").enabled


def test_items_combine() -> None:
    spec = parse_profile_spec("steady:5,request:r3,all")
    assert (spec.steady, spec.all_live, spec.requests, spec.new_shapes) == (5, True, {"r3"}, False)


@pytest.mark.parametrize("bad", ["sometimes", "steady:0", "steady:x", "request:", "new-shapes,,"])
def test_bad_items_are_refused(bad: str) -> None:
    with pytest.raises(ProfileSpecError, match="bad --profile item"):
        parse_profile_spec(bad)
