"""The connection state's transitions: every one the tables allow, and none other."""

import pytest

from proxy.session.states import (
    CLOSED,
    CLOSING,
    DOOMED,
    LEASED,
    NONE,
    OPEN,
    PINNED,
    QUEUEING,
    SHARED,
    STREAMING,
    WATCHING,
    ConnState,
    StateError,
)


def test_a_new_connection_is_shared_open_and_outside_a_transaction():
    state = ConnState()
    assert (state.lane, state.txn, state.life) == (SHARED, NONE, OPEN) and not state.own


@pytest.mark.parametrize("events, lane", [
    (["lease"], LEASED), (["lease", "release"], SHARED), (["lease", "pin"], PINNED), (["pin"], PINNED),
    (["pin", "stream"], STREAMING), (["lease", "stream"], STREAMING), (["stream"], STREAMING),
    (["pin", "stream", "unstream"], PINNED), (["stream", "drop"], SHARED),
])
def test_lanes(events, lane):
    state = ConnState()
    for event in events:
        state.to(event)
    assert state.lane is lane


@pytest.mark.parametrize("events", [["release"], ["pin", "release"], ["pin", "lease"], ["stream", "pin"],
                                    ["stream", "release"], ["pin", "drop"], ["lease", "unstream"]])
def test_lanes_never_go_where_the_table_does_not_say(events):
    state = ConnState()
    with pytest.raises(StateError):
        for event in events:
            state.to(event)


@pytest.mark.parametrize("events, txn", [
    (["multi"], QUEUEING), (["watch"], WATCHING), (["watch", "multi"], QUEUEING), (["watch", "unwatch"], NONE),
    (["multi", "refuse"], DOOMED), (["multi", "refuse", "refuse", "end"], NONE), (["multi", "end"], NONE),
])
def test_transactions(events, txn):
    state = ConnState()
    for event in events:
        state.to(event)
    assert state.txn is txn
    assert state.in_transaction == (txn in (QUEUEING, DOOMED))


@pytest.mark.parametrize("events", [["refuse"], ["multi", "watch"], ["multi", "multi"], ["multi", "unwatch"]])
def test_a_transaction_event_out_of_place_is_a_bug(events):
    state = ConnState()
    with pytest.raises(StateError):
        for event in events:
            state.to(event)


@pytest.mark.parametrize("events, life", [
    (["wait", "resume"], OPEN), (["wait", "close"], CLOSING), (["close", "lost"], CLOSED), (["wait", "lost"], CLOSED),
    (["close", "close"], CLOSING),
])
def test_life(events, life):
    state = ConnState()
    for event in events:
        state.to(event)
    assert state.life is life


def test_a_closing_connection_never_opens_again():
    state = ConnState()
    state.to("close")
    assert not state.can("resume") and not state.can("wait")
    with pytest.raises(StateError):
        state.to("wait")
