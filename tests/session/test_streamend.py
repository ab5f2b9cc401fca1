"""When a stream ends (`proxy/session/streamend.py`): the count of subscriptions left and RESET's
reply read from what the server wrote, and which commands keep a stream, or keep it for good."""

import hiredis
import pytest

from proxy.commands.table import CommandTable
from proxy.session.behaviour import CLUSTER, STANDALONE, Behaviour
from proxy.session.streamend import (
    AT_RESET,
    NEVER,
    UNSUBSCRIBED,
    goes_alone,
    last_value,
    lone_unsubscribe,
    passes,
    stream_neutral,
    subscriptions_left,
)

BEHAVIOUR = Behaviour(CommandTable.from_snapshot())


def resp2(kind: bytes, channel: bytes | None, count: int) -> bytes:
    name = b"$-1\r\n" if channel is None else b"$%d\r\n%s\r\n" % (len(channel), channel)
    return b"*3\r\n$%d\r\n%s\r\n%s:%d\r\n" % (len(kind), kind, name, count)


def resp3(kind: bytes, channel: bytes | None, count: int) -> bytes:
    return b">" + resp2(kind, channel, count)[1:].replace(b"$-1\r\n", b"_\r\n")


MESSAGE = b"*3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$1\r\n0\r\n"  # (its third element is bytes, not a count)
PMESSAGE = b">4\r\n$8\r\npmessage\r\n$2\r\np*\r\n$2\r\nps\r\n$1\r\n7\r\n"


@pytest.mark.parametrize("shown, left", [
    (resp2(b"unsubscribe", b"a", 0), 0),
    (resp2(b"unsubscribe", b"a", 1) + resp2(b"unsubscribe", b"b", 0), 0),
    (resp2(b"unsubscribe", b"a", 2) + resp2(b"unsubscribe", b"b", 1), 1),
    (resp2(b"punsubscribe", None, 0), 0),
    (resp3(b"unsubscribe", None, 0), 0),
    (resp3(b"punsubscribe", b"p*", 3), 3),
    (resp2(b"UNSUBSCRIBE", b"a", 0), 0),
    (resp2(b"unsubscribe", b"a", 0) + MESSAGE, 0),  # a message after it changes nothing
    (MESSAGE + resp2(b"unsubscribe", b"a", 1) + PMESSAGE, 1),
    (MESSAGE, None),
    (b"-NOPERM this user has no permissions to run the 'unsubscribe' command\r\n", None),
    (b"+QUEUED\r\n", None),  # in a transaction: the count comes with EXEC, not seen here
    (b"", None),
    (b"*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n+0\r\n", None),  # not a count
    (b"*2\r\n$11\r\nunsubscribe\r\n:0\r\n", None),
    (b"*3\r\n:1\r\n:2\r\n:0\r\n", None),  # (no name first)
    (b"*3\r\n*1\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n", None),
    (b"*3\r\n$11\r\nunsubscribe\r\n$1\r\na\r\n:0\r\n" + b"\x00garbage", None),  # not RESP: nothing is known
])
def test_the_count_left_is_the_last_confirmations(shown, left):
    assert subscriptions_left(shown) == left


def test_the_count_is_read_whatever_the_confirmations_cut():
    shown = resp3(b"unsubscribe", b"a", 1) + PMESSAGE + resp3(b"unsubscribe", b"b", 0)
    reader = hiredis.Reader()
    reader.feed(shown)
    assert len(list(iter(reader.gets, False))) == 3
    assert subscriptions_left(shown) == 0
    assert subscriptions_left(shown[:-4]) == 1  # (the last one not whole: the one before counts)


@pytest.mark.parametrize("args, alone", [
    ([b"UNSUBSCRIBE"], True), ([b"unsubscribe", b"a"], True), ([b"PUNSUBSCRIBE", b"p*"], True),
    ([b"UNSUBSCRIBE", b"a", b"b"], False),  # one reply a channel, or one error: not known
    ([b"SUBSCRIBE", b"a"], False), ([b"SUNSUBSCRIBE"], True), ([b"sunsubscribe", b"s"], True),
    ([b"SUNSUBSCRIBE", b"s", b"t"], False), ([b"PING"], False),
])
def test_a_lone_unsubscribe_names_one_channel_at_most(args, alone):
    assert lone_unsubscribe(args) is alone


class Own:
    def __init__(self, protocol: int):
        self.protocol = protocol


class Client:
    def __init__(self, protocol: int = 2, own=None, replies_unsure: bool = False):
        self.protocol = protocol
        self.own = own
        self.replies_unsure = replies_unsure


@pytest.mark.parametrize("client, args, alone", [
    (Client(), [b"UNSUBSCRIBE"], True),
    (Client(own=Own(2)), [b"PUNSUBSCRIBE", b"p*"], True),
    (Client(protocol=3), [b"UNSUBSCRIBE"], False),  # its reply is a push: not counted as one
    (Client(own=Own(3)), [b"UNSUBSCRIBE"], False),
    (Client(), [b"UNSUBSCRIBE", b"a", b"b"], False),
    (Client(), [b"CLIENT", b"REPLY", b"ON"], True),
    (Client(protocol=3), [b"client", b"reply", b"on"], True),
    (Client(replies_unsure=True), [b"CLIENT", b"REPLY", b"ON"], False),  # may turn them on again
    (Client(), [b"CLIENT", b"REPLY", b"OFF"], False),
    (Client(), [b"CLIENT", b"REPLY", b"SKIP"], False),
    (Client(), [b"SUBSCRIBE", b"a"], False),
])
def test_what_goes_as_any_command(client, args, alone):
    assert goes_alone(client, args) is alone


@pytest.mark.parametrize("column", [STANDALONE, CLUSTER])
def test_neutral_commands_hold_no_connection_state(column):
    neutral = stream_neutral(BEHAVIOUR.actions[column])
    for name in (b"get", b"hset", b"ping", b"publish", b"blpop", b"eval", b"subscribe", b"punsubscribe"):
        assert name in neutral, name
    for name in (b"select", b"multi", b"watch", b"hello", b"auth", b"client", b"monitor", b"ssubscribe",
                 b"sunsubscribe", b"reset", b"quit", b"script", b"readonly"):
        assert name not in neutral, name
    assert all(name == name.lower() for name in neutral)


@pytest.mark.parametrize("shown, last", [
    (b"+RESET\r\n", b"RESET"),
    (MESSAGE + b"+RESET\r\n", b"RESET"),  # a message before RESET's reply
    (b"+1700000000.000000 [0 127.0.0.1:5] \"GET\" \"k\"\r\n+RESET\r\n", b"RESET"),  # a MONITOR line
    (b"-NOPERM this user has no permissions to run the 'reset' command\r\n", None),
    (b"+RESET\r\n" + MESSAGE, None),  # (the last is the message: not RESET's)
    (b"$5\r\nRESET\r\n", b"RESET"),  # (no bulk reply comes between the barriers around RESET)
    (b"", None),
    (b"+RESET\r\n\x00", None),  # not RESP: nothing is known
])
def test_the_last_value_shown(shown, last):
    value = last_value(shown)
    assert (value if type(value) is bytes else None) == last


NEUTRAL = stream_neutral(BEHAVIOUR.actions[STANDALONE])


@pytest.mark.parametrize("level, args, after", [
    (UNSUBSCRIBED, [b"PING"], UNSUBSCRIBED),
    (UNSUBSCRIBED, [b"psubscribe", b"p*"], UNSUBSCRIBED),
    (UNSUBSCRIBED, [b"WATCH", b"k"], AT_RESET),  # state RESET clears
    (UNSUBSCRIBED, [b"MONITOR"], AT_RESET),
    (UNSUBSCRIBED, [b"SSUBSCRIBE", b"s"], AT_RESET),
    (AT_RESET, [b"GET", b"k"], AT_RESET),
    (AT_RESET, [b"PSYNC", b"?", b"-1"], NEVER),  # a replica link: RESET is refused there
    (UNSUBSCRIBED, [b"sync"], NEVER),
    (AT_RESET, [b"REPLCONF", b"listening-port", b"1"], NEVER),
    (AT_RESET, [b"SCRIPT", b"DEBUG", b"YES"], NEVER),  # the debugger reads commands of its own
    (AT_RESET, [b"SCRIPT", b"FLUSH"], AT_RESET),
    (NEVER, [b"PING"], NEVER),
])
def test_what_a_command_on_the_stream_leaves(level, args, after):
    client = Client()
    client.stream_ends = level
    passes(client, args, NEUTRAL)
    assert client.stream_ends == after
