"""Rows (plain dicts) into a typed pandas DataFrame: the only module of diag that imports
pandas, and only when a frame is asked for (`diag check` and `diag record` never get here)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from diag.notebook.columns import TIME, Column


def to_frame(rows: Iterable[dict[str, Any]], columns: Sequence[Column]) -> Any:
    """A DataFrame with exactly `columns`, in order and typed, whatever the rows hold (keys a
    row lacks are missing values; an empty frame keeps its columns and dtypes)."""
    import pandas as pd  # type: ignore[import-untyped]

    names = [c.name for c in columns]
    frame = pd.DataFrame.from_records(list(rows), columns=names)
    for column in columns:
        values = frame[column.name]
        if column.dtype == TIME:
            frame[column.name] = pd.to_datetime(values.astype("Int64"), unit="ns", utc=True)
        elif column.dtype == "object":
            frame[column.name] = values.astype(object)
        else:
            frame[column.name] = values.astype(column.dtype)
    return frame
