"""The one reader of integers in trace text (diag/trace/numerals.py) and the fallback JSON
decoder (diag/trace/jsontext.py): what once stopped a command with a traceback (issue 37)."""

from __future__ import annotations

from diag.trace.format import env_rank, env_world_size, step_segment_number
from diag.trace.jsontext import loads
from diag.trace.numerals import parse_int


def test_only_ascii_digits_of_bounded_length_are_numbers() -> None:
    assert parse_int("12") == 12 and parse_int("-3", signed=True) == -3
    for text in ("²", "٣", "-3", "1.5", " 1", "1\n", "", "9" * 21, "9" * 5000, None, 7):
        assert parse_int(text) is None, text
    assert parse_int("9" * 20) == int("9" * 20)
    assert step_segment_number("steps-².jsonl") is None
    assert step_segment_number("steps-٣.jsonl") is None
    assert step_segment_number("steps-12.jsonl") == 12


def test_the_writer_reads_rank_variables_as_the_reader_bounds_them() -> None:
    assert env_rank("3") == 3 and env_world_size("8") == 8
    for value in ("99999999999", "²", "-1", "", None):
        assert env_rank(value) is None and env_world_size(value) is None, value
    assert env_world_size("0") is None


def test_lone_surrogates_become_replacement_characters_in_keys_and_values() -> None:
    decoded = loads(b'{"a\\ud800": ["\\ud800x", "\\ud83d\\ude00", "\\\\ud800"]}')
    assert decoded == {"a\ufffd": ["\ufffdx", "\U0001f600", "\\ud800"]}
    assert loads(b'{"bad": "\xff"}') == {"bad": "\ufffd"}
