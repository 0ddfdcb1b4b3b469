"""Robust statistics for every judgment of time: medians, a spread that one outlier cannot
move, and a comparison that answers "too noisy to judge" instead of guessing.

Why: step times on a shared host move with other processes (a 2-core CI box at load 4 made a
clean run's step 0 five times its steady steps; a baseline recorded during a load spike had a
median ten times the current one). Means follow one slow step; the median and the median
absolute deviation (MAD) do not, so each verdict compares medians and asks whether the
difference stands clear of the spread on both sides. Standard library only: `check` imports it.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: MAD times this estimates the standard deviation of normally distributed values.
MAD_TO_SIGMA = 1.4826

#: `compare`'s defaults: fewer steps than this on a side cannot be judged ...
MIN_STEPS = 2
#: ... nor a side whose spread is more than this share of its median ...
MAX_RELATIVE_SPREAD = 0.25
#: ... and medians closer than this share (or NOISE_SIGMAS spreads) count as the same.
MIN_BAND = 0.10
NOISE_SIGMAS = 3.0

SLOWER = "slower"
FASTER = "faster"
SAME = "same"
NOISY = "noisy"


@dataclass(frozen=True)
class Sample:
    """A set of step times, summarised robustly."""

    n: int
    median: float
    spread: float  # MAD_TO_SIGMA x the median absolute deviation, in the values' unit
    low: float
    high: float

    @property
    def relative_spread(self) -> float:
        """The spread as a share of the median (0 when the median is 0)."""
        return self.spread / self.median if self.median > 0 else 0.0

    def describe(self, unit: float = 1000.0, suffix: str = "ms") -> str:
        """`median 12.30 ms ± 0.80 ms over 6 steps (11.90-14.10 ms)`."""
        return (
            f"median {self.median * unit:.2f} {suffix} ± {self.spread * unit:.2f} {suffix} over "
            f"{self.n} step(s) ({self.low * unit:.2f}-{self.high * unit:.2f} {suffix})"
        )


def sample(values: Iterable[float]) -> Sample | None:
    """The robust summary of `values`, or None when there are none."""
    data = sorted(float(v) for v in values)
    if not data:
        return None
    middle = statistics.median(data)
    return Sample(len(data), middle, mad_spread(data, middle), data[0], data[-1])


def mad_spread(values: Sequence[float], center: float | None = None) -> float:
    """MAD_TO_SIGMA x the median absolute deviation from `center` (the median by default)."""
    if not values:
        return 0.0
    middle = statistics.median(values) if center is None else center
    return MAD_TO_SIGMA * statistics.median(abs(v - middle) for v in values)


def stands_out(value: float, baseline: Sample, sigmas: float = NOISE_SIGMAS) -> bool:
    """Whether `value` lies more than `sigmas` spreads above the baseline's median."""
    return value - baseline.median > sigmas * baseline.spread


@dataclass(frozen=True)
class Comparison:
    """`current` against `reference`: SLOWER, FASTER, SAME or NOISY, and why."""

    verdict: str
    current: Sample | None
    reference: Sample | None
    band: float  # relative change within which the medians count as the same
    reason: str = ""  # for NOISY: which side, and what made it unjudgeable

    @property
    def ratio(self) -> float | None:
        if self.current is None or self.reference is None or self.reference.median <= 0:
            return None
        return self.current.median / self.reference.median

    @property
    def judged(self) -> bool:
        return self.verdict != NOISY


def compare(
    current: Iterable[float],
    reference: Iterable[float],
    *,
    min_steps: int = MIN_STEPS,
    max_relative_spread: float = MAX_RELATIVE_SPREAD,
    min_band: float = MIN_BAND,
    sigmas: float = NOISE_SIGMAS,
    labels: tuple[str, str] = ("current", "reference"),
) -> Comparison:
    """Compare two sets of step times by their medians, inside a noise band.

    NOISY when a side has fewer than `min_steps` values or a spread wider than
    `max_relative_spread` of its median. Otherwise the band is `min_band`, widened to
    `sigmas` relative spreads of the noisier side; a ratio of medians past 1 + band is SLOWER
    (or below 1 / (1 + band) FASTER), anything between is SAME.
    """
    now, before = sample(current), sample(reference)
    for side, label in ((now, labels[0]), (before, labels[1])):
        count = side.n if side is not None else 0
        if count < min_steps:
            return Comparison(
                NOISY, now, before, min_band, f"{label}: {count} step(s), {min_steps} needed"
            )
    assert now is not None and before is not None
    for side, label in ((now, labels[0]), (before, labels[1])):
        if side.relative_spread > max_relative_spread or side.median <= 0:
            return Comparison(
                NOISY,
                now,
                before,
                min_band,
                f"{label} steps spread ±{side.relative_spread:.0%} around their median "
                f"(more than ±{max_relative_spread:.0%})",
            )
    band = max(min_band, sigmas * max(now.relative_spread, before.relative_spread))
    ratio = now.median / before.median
    if ratio > 1 + band:
        verdict = SLOWER
    elif ratio < 1 / (1 + band):
        verdict = FASTER
    else:
        verdict = SAME
    return Comparison(verdict, now, before, band)
