"""The proactive bodies' documented patterns against the validators they describe."""

from __future__ import annotations

import re
import sys
from typing import Any

from hypothesis import example, given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from claybot.api.codeck.proactive_bodies import (
    NAME_PATTERN,
    NOT_BLANK_PATTERN,
    RUNNER_RULE,
    WHITESPACE,
    character_class,
)
from claybot.proactive.inputs import CreateAgentInput

BASE = {"name": "n", "objective": "o", "schedule": "* * * * *", "runner": "engine"}
# Plain letters, and the characters the validators care about: whitespace as
# str.strip() sees it, control characters, NUL, a dash.
TEXT = st.text(
    st.sampled_from("ab -\t\n\x00\x01\x1c\x1f\x7f\x85\xa0\u2028\u3000\ufeff"), max_size=8
)


def accepts(**fields: Any) -> bool:
    try:
        CreateAgentInput.model_validate({**BASE, **fields})
    except ValidationError:
        return False
    return True


def claude_objective_pattern() -> str:
    rule: Any = RUNNER_RULE[1]
    pattern: str = rule["properties"]["objective"]["pattern"]
    return pattern


@settings(max_examples=500, derandomize=True, database=None)
@given(TEXT)
@example(" a\t")
@example("\x1ca\x1c")
def test_the_name_pattern_is_the_name_check(name: str) -> None:
    assert (re.search(NAME_PATTERN, name) is not None) == accepts(name=name), repr(name)


@settings(max_examples=500, derandomize=True, database=None)
@given(TEXT)
def test_the_not_blank_pattern_is_the_objective_and_cwd_check(text: str) -> None:
    documented = re.search(NOT_BLANK_PATTERN, text) is not None
    assert documented == accepts(objective=text), repr(text)
    # The cwd must also exist inside the workspace; that is the service's to check.
    assert documented == accepts(cwd=text), repr(text)


@settings(max_examples=500, derandomize=True, database=None)
@given(TEXT)
@example(" -a")
def test_the_claude_objective_pattern_refuses_a_leading_dash(objective: str) -> None:
    documented = re.search(claude_objective_pattern(), objective) is not None
    expected = re.search(NOT_BLANK_PATTERN, objective) is not None and not (
        objective.lstrip().startswith("-")
    )
    assert documented == expected, repr(objective)


def test_the_whitespace_written_out_is_what_python_strips() -> None:
    """WHITESPACE is spelled out to spare every start a pass over all code points."""
    computed = character_class([c for c in range(sys.maxunicode + 1) if chr(c).isspace()])
    assert computed == WHITESPACE
