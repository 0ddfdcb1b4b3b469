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


#: Student's t, two-sided 95% (the 0.975 quantile), by degrees of freedom; past 30 the normal's.
_T_975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t_975(degrees: int) -> float:
    """The two-sided 95% quantile of Student's t with `degrees` degrees of freedom (>= 1)."""
    if degrees < 1:
        raise ValueError("a t interval needs at least one degree of freedom")
    return _T_975[degrees - 1] if degrees <= len(_T_975) else 1.960


@dataclass(frozen=True)
class Interval:
    """A mean with its 95% confidence interval (`low`, `high`); both None from one value."""

    n: int
    mean: float
    low: float | None
    high: float | None

    @property
    def known(self) -> bool:
        return self.low is not None and self.high is not None

    def spans(self, value: float) -> bool:
        """Whether `value` lies inside the interval (an unknown interval spans everything)."""
        if self.low is None or self.high is None:
            return True
        return self.low <= value <= self.high


def mean_interval(values: Sequence[float], floor: float | None = None) -> Interval | None:
    """The mean of independent measurements (one per trial) and its 95% t interval, its low
    end held at `floor` when given (a time is never below 0, however few the trials).

    Trials, not steps, are the independent units: the steps of one process share its compiled
    code, allocator and caches, so their spread understates how much a repeat would move."""
    if not values:
        return None
    mean = statistics.fmean(values)
    if len(values) < 2:
        return Interval(1, mean, None, None)
    half = t_975(len(values) - 1) * statistics.stdev(values) / len(values) ** 0.5
    low = mean - half if floor is None else max(floor, mean - half)
    return Interval(len(values), mean, low, mean + half)


def reduction_interval(reference: Sequence[float], other: Sequence[float]) -> Interval | None:
    """(mean(reference) - mean(other)) / mean(reference), with a 95% interval.

    The delta method on the ratio of two independent means (the trials of two configurations),
    with t at the fewer trials' degrees of freedom, which errs wide. None when either side is
    empty or the reference's mean is not positive; no interval when a side has one trial."""
    if not reference or not other:
        return None
    ref_mean, other_mean = statistics.fmean(reference), statistics.fmean(other)
    if ref_mean <= 0:
        return None
    ratio = other_mean / ref_mean
    if len(reference) < 2 or len(other) < 2:
        return Interval(min(len(reference), len(other)), 1 - ratio, None, None)
    rel_var = statistics.variance(reference) / (len(reference) * ref_mean**2)
    if other_mean > 0:
        rel_var += statistics.variance(other) / (len(other) * other_mean**2)
    half = t_975(min(len(reference), len(other)) - 1) * ratio * rel_var**0.5
    return Interval(min(len(reference), len(other)), 1 - ratio, 1 - ratio - half, 1 - ratio + half)
