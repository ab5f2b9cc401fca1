"""The reply window without a network (the rig of test_session.py): how many of a client's
commands go upstream before their replies, and the pure decisions of proxy/bounds.py."""

import pytest

from proxy.bounds import plan_memory
from proxy.config import ConfigError, Limits, default_max_memory, load_config
from proxy.session.session import IN_FLIGHT
from proxy.session.states import OPEN, WAITING
from tests.servers import parse_all
from tests.session.test_session import Rig, replies

GET = [b"GET", b"k"]


def bulk(size: int) -> bytes:
    return b"$%d\r\n%s\r\n" % (size, b"x" * size)


def test_before_its_first_reply_a_client_has_at_most_in_flight_commands_upstream():
    rig = Rig()
    try:
        rig.send(*[GET] * 40)
        shared = rig.shared()
        assert len(rig.sent(shared)) == IN_FLIGHT
        assert rig.session.state.life is WAITING and not rig.client.reading
        rig.answer(shared, bulk(3) * IN_FLIGHT)
        rig.run()
        assert len(rig.sent(shared)) == 40 - IN_FLIGHT
        rig.answer(shared, bulk(3) * (40 - IN_FLIGHT))
        assert replies(rig) == [b"xxx"] * 40
        assert rig.session.state.life is OPEN and rig.client.reading
    finally:
        rig.close()


def test_small_replies_first_do_not_let_large_commands_through_together():
    """PING, then MGETs of many keys, never read: each MGET counts its keys, so one goes alone
    once nothing is in flight, and none while the client is over its window."""
    rig = Rig(client_write_buffer=10_000)
    try:
        rig.send([b"PING"], [b"GET", b"k"])
        shared = rig.shared()
        rig.sent(shared)
        rig.answer(shared, b"+PONG\r\n" + bulk(3))
        mget = [b"MGET"] + [b"k%d" % n for n in range(100)]
        rig.send(*[mget] * 5)
        assert [len(c) for c in rig.sent(shared)] == [101]
        rig.answer(shared, b"*100\r\n" + bulk(50) * 50)  # half the reply
        rig.client.buffered = 6_000
        rig.session.pause_writing()  # the client does not read
        rig.answer(shared, bulk(50) * 50)
        rig.run()
        assert rig.sent(shared) == []
        rig.client.buffered = 0
        rig.session.resume_writing()
        rig.run()
        assert [len(c) for c in rig.sent(shared)] == [101]  # the next, alone
        rig.answer(shared, b"*100\r\n" + bulk(50) * 100)
        rig.run()
        assert [len(c) for c in rig.sent(shared)] == [101]
    finally:
        rig.close()


def test_replies_in_flight_slide_a_reply_completed_lets_the_next_command_go():
    """~1 KB replies, a 10 KB window: ten GETs in flight, each sent alone (the fast path), and
    each reply that completes lets one more go, without waiting for all of them."""
    rig = Rig(client_write_buffer=10_000)
    try:
        rig.send(GET)
        shared = rig.shared()
        rig.sent(shared)
        rig.answer(shared, bulk(990))
        for _ in range(15):
            rig.send(GET)
        assert len(rig.sent(shared)) == 10
        assert rig.session.state.life is WAITING
        rig.answer(shared, bulk(990))
        rig.run()
        assert len(rig.sent(shared)) == 1
        rig.answer(shared, bulk(990) * 10)
        rig.run()
        assert len(rig.sent(shared)) == 4
        rig.answer(shared, bulk(990) * 4)
        rig.run()
        assert len(parse_all(rig.client.taken())) == 16 and rig.session.state.life is OPEN
    finally:
        rig.close()


def test_after_large_replies_a_stretch_is_the_window_over_their_size_one_in_flight():
    rig = Rig(client_write_buffer=10_000)
    try:
        rig.send(GET)
        shared = rig.shared()
        rig.sent(shared)
        rig.answer(shared, bulk(4000))  # ~4 KB a reply: two fit the window
        rig.send(*[GET] * 7)
        assert len(rig.sent(shared)) == 2
        rig.answer(shared, bulk(4000))
        rig.run()
        assert rig.sent(shared) == []  # the stretch is not all in yet
        rig.answer(shared, bulk(4000))
        rig.run()
        assert len(rig.sent(shared)) == 2
        rig.answer(shared, bulk(10) * 2)  # small again: the rest at once
        rig.run()
        assert len(rig.sent(shared)) == 3
        rig.answer(shared, bulk(10) * 3)
        assert len(parse_all(rig.client.taken())) == 8
    finally:
        rig.close()


def test_nothing_more_goes_upstream_while_the_client_is_over_its_window():
    rig = Rig()
    try:
        rig.send(GET)
        shared = rig.shared()
        rig.sent(shared)
        rig.answer(shared, bulk(3))
        rig.client.buffered = 2_000_000  # the client stopped reading
        rig.session.pause_writing()
        rig.send(GET, GET)
        assert rig.sent(shared) == []
        rig.client.buffered = 0
        rig.session.resume_writing()
        rig.run()
        assert len(rig.sent(shared)) == 2
    finally:
        rig.close()


def test_a_fast_reader_waiting_for_one_reply_at_a_time_is_never_held():
    rig = Rig()
    try:
        shared = None
        for n in range(50):
            rig.send(GET)
            shared = rig.shared()
            assert len(rig.sent(shared)) == 1
            rig.answer(shared, bulk(2_000_000 if n % 2 else 3))
        assert len(parse_all(rig.client.taken())) == 50
    finally:
        rig.close()


def test_memory_plan_pauses_the_largest_first_and_resumes_under_three_quarters():
    holdings = [(60, "a"), (30, "b"), (5, "c"), (5, "d")]
    to_pause, resume, over = plan_memory(holdings, 80, set())
    assert to_pause == ["a"] and not resume and over  # the others hold 40 <= 80 / 2
    to_pause, resume, over = plan_memory(holdings, 80, {"a"})
    assert to_pause == [] and over
    assert plan_memory(holdings, 100, {"a"}) == ([], False, False)  # between 3/4 and the bound: as it is
    assert plan_memory([(10, "a"), (10, "b")], 100, {"a"}) == ([], True, False)
    to_pause, _, _ = plan_memory([(40, "a"), (40, "b"), (40, "c")], 80, set())
    assert len(to_pause) == 2


def test_limits_settings_and_their_validation(tmp_path):
    assert default_max_memory() > 0 and Limits().max_clients == 10000 and Limits().client_idle_timeout == 0
    config = tmp_path / "c.yaml"
    config.write_text("limits: {max_memory: 0, max_clients: 5, client_idle_timeout: 2.5}\n")
    limits = load_config(str(config)).limits
    assert (limits.max_memory, limits.max_clients, limits.client_idle_timeout) == (0, 5, 2.5)
    for bad in ("max_memory: -1", "max_clients: 0", "client_idle_timeout: -1", "client_idle_timeout: on"):
        config.write_text(f"limits: {{{bad}}}\n")
        with pytest.raises(ConfigError):
            load_config(str(config))
