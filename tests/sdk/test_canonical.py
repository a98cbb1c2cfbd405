import random
import struct

import rfc8785
from airlock_sdk.canonical import canonical_json
from hypothesis import given
from hypothesis import strategies as st

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**53) + 1, max_value=2**53 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(json_values)
def test_the_sdk_canonicalises_exactly_like_the_server(value):
    assert canonical_json(value) == rfc8785.dumps(value)


def test_float_formatting_matches_on_random_bit_patterns():
    rng = random.Random(8785)
    for _ in range(5000):
        value = struct.unpack("d", struct.pack("Q", rng.getrandbits(64)))[0]
        if value == value and abs(value) != float("inf"):
            assert canonical_json(value) == rfc8785.dumps(value), value
