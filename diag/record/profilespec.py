"""`--profile SPEC`: which live steps torch.profiler traces. Parsed by the launcher (to refuse a
bad spec before the child starts) and by the collectors in the child."""

from __future__ import annotations

from dataclasses import dataclass, field

DEFAULT_SPEC = "new-shapes,steady:2"


class ProfileSpecError(ValueError):
    pass


@dataclass(frozen=True)
class ProfileSpec:
    """Which live steps to profile. Grammar: `none`, `default`, or a comma list of
    `new-shapes` (the first live step of each shape not profiled yet), `steady:N` (N steps from
    the third step of the first live request long enough; a window closes with its request, so
    when a request ends first the next live requests profile the rest from their own third
    step), `all` (every live step),
    `request:ID` (every step of request ID)."""

    new_shapes: bool = False
    steady: int = 0
    all_live: bool = False
    requests: frozenset[str] = field(default_factory=frozenset)

    @property
    def enabled(self) -> bool:
        return self.new_shapes or self.steady > 0 or self.all_live or bool(self.requests)


def parse_profile_spec(text: str) -> ProfileSpec:
    text = text.strip() or "default"
    if text == "none":
        return ProfileSpec()
    if text == "default":
        text = DEFAULT_SPEC
    new_shapes, steady, all_live, requests = False, 0, False, set()
    for item in (part.strip() for part in text.split(",")):
        if item == "new-shapes":
            new_shapes = True
        elif item == "all":
            all_live = True
        elif item.startswith("steady:") and item[7:].isdigit() and int(item[7:]) > 0:
            steady = int(item[7:])
        elif item.startswith("request:") and item[8:]:
            requests.add(item[8:])
        else:
            raise ProfileSpecError(
                f"bad --profile item {item!r}: expected none, default, new-shapes, steady:N, "
                "all or request:ID"
            )
    return ProfileSpec(new_shapes, steady, all_live, frozenset(requests))
