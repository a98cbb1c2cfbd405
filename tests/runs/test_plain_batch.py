"""The gate's short cut for the usual batch body (runs.api.serializers.plain_batch) accepts exactly what
CallBatchSerializer accepts and gives the same result; anything it does not take, the serializer judges."""

from hypothesis import given
from hypothesis import strategies as st

from runs.api.serializers import MAX_BATCH_CALLS, CallBatchSerializer, plain_batch

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)
calls = st.lists(json_values, min_size=0, max_size=MAX_BATCH_CALLS + 2)
bodies = st.one_of(
    json_values,
    st.fixed_dictionaries({"calls": calls}),
    st.fixed_dictionaries({"calls": calls | json_values}, optional={"exposed_tools": json_values, "x": json_values}),
)


@given(bodies)
def test_the_short_cut_agrees_with_the_serializer(body):
    short = plain_batch(body)
    serializer = CallBatchSerializer(data=body)
    valid = serializer.is_valid()
    if short is not None:
        assert valid and dict(serializer.validated_data) == short


def test_it_takes_the_usual_body_and_leaves_the_rest_to_the_serializer():
    usual = {"calls": [{"call_id": "c1", "name": "orders.read", "arguments": {}}]}
    assert plain_batch(usual) == usual
    for other in (
        {"calls": []},
        {"calls": [{}] * (MAX_BATCH_CALLS + 1)},
        {"calls": "x"},
        {"calls": [{}], "exposed_tools": ["a"]},
        [usual],
        None,
    ):
        assert plain_batch(other) is None
