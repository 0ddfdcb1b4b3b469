"""The `/` filter: words and `key:value` terms matched against a row's named fields.

`frame:wan phase:live kind:tensor-size` keeps rows whose frame contains `wan`, whose phase
contains `live` and whose guard kinds contain `tensor-size`; a bare word matches any field;
`key:a,b` matches either value; quotes keep spaces (`guard:"len(x) == 3"`). All terms must
match. Pure functions, so jumps from a finding and typed filters share one code path.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    key: str | None  # None: any field
    values: tuple[str, ...]  # lower-cased alternatives


@dataclass(frozen=True)
class Query:
    terms: tuple[Term, ...] = ()
    # `key:` prefixes that name no field of the view (searched as plain text instead).
    unknown_keys: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.terms)


def _split(text: str) -> list[str]:
    try:
        return shlex.split(text)
    except ValueError:  # an unbalanced quote while the person is still typing
        return text.replace('"', " ").replace("'", " ").split()


def parse_query(text: str, aliases: Mapping[str, str] | None = None) -> Query:
    """Parse a filter; `aliases` maps short keys (`req`) to field names (`request`).

    A `key:` that names no known field is read as a plain word, so typing `a:b` into a view
    that has no field `a` still searches for the text.
    """
    known = aliases or {}
    terms: list[Term] = []
    unknown: list[str] = []
    for token in _split(text):
        key, sep, value = token.partition(":")
        field = known.get(key.lower()) if sep else None
        if field is not None:
            values = tuple(v.lower() for v in value.split(",") if v)
            if values:
                terms.append(Term(field, values))
        else:
            if sep and key and value and key.isidentifier():
                unknown.append(key.lower())
            terms.append(Term(None, (token.lower(),)))
    return Query(tuple(terms), tuple(dict.fromkeys(unknown)))


def matches(query: Query, fields: Mapping[str, str], exact: frozenset[str] = frozenset()) -> bool:
    """True when every term matches: as a substring, or equal for the fields in `exact`."""
    for term in query.terms:
        if term.key is None:
            haystack = [v.lower() for v in fields.values()]
            if not any(value in hay for value in term.values for hay in haystack):
                return False
            continue
        have = fields.get(term.key, "").lower()
        if term.key in exact:
            options = {part.strip() for part in have.split(",")}
            if not any(value in options for value in term.values):
                return False
        elif not any(value in have for value in term.values):
            return False
    return True


def quote(value: str) -> str:
    """A value as a filter term needs it: quoted when it holds spaces or quotes.

    A comma separates alternatives, so a value holding one is cut to its longest comma-free
    piece: still a substring of the value, so the row it came from still matches.
    """
    if "," in value:
        value = max(value.split(","), key=len)
    if value and not any(c in value for c in " \t\"'"):
        return value
    return shlex.quote(value)
