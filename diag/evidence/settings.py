"""The program's own Dynamo settings at a compile, read off `compile_settings` events.

Why: a frame that hits the recompile limit after two compiles hit a limit the program set; "8 by
default" is torch's number, not the program's. The compile collector writes the settings each
time they differ from the last ones written (collectors/compiles.py), with torch's defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from diag.trace.run import Compile, RunData


@dataclass(frozen=True)
class Setting:
    name: str
    value: Any
    default: Any  # None: torch's default not recorded
    #: The attribute as the recording's torch names it, where it differs from `name`:
    #: `cache_size_limit` on a torch that has no `recompile_limit` yet (2.6).
    attr: str | None = None

    @property
    def changed(self) -> bool:
        return self.default is not None and self.value != self.default

    def phrase(self) -> str:
        """`the program lowered recompile_limit to 2 (torch's default: 8)`."""
        name = f"torch._dynamo.config.{self.attr or self.name}"
        if not self.changed:
            return f"{name} = {self.value!r} (torch's default)"
        verb = "set"
        if isinstance(self.value, int | float) and not isinstance(self.value, bool):
            verb = "lowered" if self.value < self.default else "raised"
        return f"the program {verb} {name} to {self.value!r} (torch's default: {self.default!r})"


def settings_at(run: RunData, pid: int, t: int) -> dict[str, Setting]:
    """The settings in effect at time `t` in process `pid` (the last event written before it),
    or {} when the trace has none (an older recording, or a torch without those settings)."""
    found: dict[str, Setting] = {}
    for event in run.of("compile_settings"):
        if event.pid != pid or event.t > t:
            continue
        values, defaults = event.data.get("settings"), event.data.get("defaults")
        if not isinstance(values, dict):
            continue
        defaults = defaults if isinstance(defaults, dict) else {}
        found = {
            str(k): Setting(str(k), v, defaults.get(k))
            for k, v in values.items()
            if k != "cache_size_limit" or "recompile_limit" not in values
        }
        if "cache_size_limit" in found:  # torch before recompile_limit's name
            old = found.pop("cache_size_limit")
            found["recompile_limit"] = Setting(
                "recompile_limit", old.value, old.default, attr="cache_size_limit"
            )
    return found


def setting_for(run: RunData, item: Compile, name: str) -> Setting | None:
    """One setting in effect when `item` compiled."""
    return settings_at(run, item.pid, item.t).get(name)


def changed_settings(run: RunData, item: Compile) -> list[Setting]:
    """The settings the program changed from torch's defaults, in effect at `item`."""
    return [s for s in settings_at(run, item.pid, item.t).values() if s.changed]


def limit_while(run: RunData, items: list[Compile]) -> Setting | None:
    """The highest recompile limit in effect at any of `items` (a frame's warmup compiles): a
    limit lowered by `config.patch` around serving only refuses the compiles made under it,
    and entries warmup compiled under a higher one still serve the calls that match them."""
    limits = [setting_for(run, item, "recompile_limit") for item in items]
    known = [s for s in limits if s is not None and isinstance(s.value, int)]
    return max(known, key=lambda s: int(s.value)) if known else None
