"""The ledger's JSON columns written without json's per-call set-up: a decision's inputs read
exactly as json writes them, whatever the values (the rest goes to json itself); the stage
timings as json reads them, to the microsecond."""

from __future__ import annotations

import json
import math

from hypothesis import given
from hypothesis import strategies as st

from trader.engine.report import STAGES
from trader.ledger.codec import compact_json, sorted_seconds_json

_VALUES = st.one_of(
    st.floats(allow_nan=True, allow_infinity=True), st.integers(), st.booleans(), st.none(),
    st.text(), st.lists(st.integers(), max_size=2),
)  # fmt: skip


@given(st.dictionaries(st.text(), _VALUES, max_size=5))
def test_a_decisions_inputs_as_json_writes_them(inputs):
    assert compact_json(inputs) == json.dumps(inputs, separators=(",", ":"))


@given(st.lists(st.floats(0, 10, allow_nan=False), min_size=7, max_size=7))
def test_stage_timings_are_json_to_the_microsecond(seconds):
    timings = dict(zip((*STAGES, "rollback"), seconds, strict=True))
    timings["data"] = math.ulp(1.0)
    text = sorted_seconds_json(timings)
    read = json.loads(text)
    assert list(read) == sorted(timings)
    assert read == {k: round(v, 6) for k, v in timings.items()}
    assert json.loads(sorted_seconds_json({})) == {}
