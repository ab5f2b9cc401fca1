"""Which requests wait (`proxy/session/gone.py`): what a client that goes away must not leave
waiting upstream. Pure logic, from the command table's flags."""

import hiredis
import pytest

from proxy.commands.table import CommandTable
from proxy.session.gone import unanswered, waiting_names, waits

NAMES = waiting_names(CommandTable.from_snapshot())


@pytest.mark.parametrize("request_", [
    (b"BLPOP", b"q", b"0"), (b"brpop", b"q", b"1"), (b"BLMOVE", b"a", b"b", b"LEFT", b"RIGHT", b"0"),
    (b"BRPOPLPUSH", b"a", b"b", b"0"), (b"BZPOPMIN", b"z", b"0"), (b"BZPOPMAX", b"z", b"0"),
    (b"BLMPOP", b"0", b"1", b"q", b"LEFT"), (b"BZMPOP", b"0", b"1", b"z", b"MIN"),
    (b"XREAD", b"BLOCK", b"0", b"STREAMS", b"s", b"$"),
    (b"XREADGROUP", b"GROUP", b"g", b"c", b"COUNT", b"1", b"block", b"0", b"STREAMS", b"s", b">"),
    (b"WAIT", b"1", b"0"), (b"WAITAOF", b"1", b"0", b"0"),
])
def test_commands_that_wait(request_):
    assert waits(request_, NAMES)


@pytest.mark.parametrize("request_", [
    (b"GET", b"k"), (b"LPOP", b"q"), (b"EVAL", b"return 1", b"0"), (b"XREAD", b"STREAMS", b"s", b"0"),
    # BLOCK after STREAMS is a key's name, not the option.
    (b"XREAD", b"STREAMS", b"block", b"0", b"0"),
    (b"XREADGROUP", b"GROUP", b"g", b"c", b"STREAMS", b"s", b">"), (b"CLIENT", b"UNBLOCK", b"1"),
])
def test_commands_that_do_not_wait(request_):
    assert not waits(request_, NAMES)


def test_the_unanswered_requests_are_the_last_of_the_run():
    run = b"".join(hiredis.pack_command(args) for args in [("SET", "a", "1"), ("BLPOP", "q", "0"), ("GET", "a")])
    assert unanswered(run, 3) == [[b"SET", b"a", b"1"], [b"BLPOP", b"q", b"0"], [b"GET", b"a"]]
    assert unanswered(run, 2) == [[b"BLPOP", b"q", b"0"], [b"GET", b"a"]]
    assert unanswered(run, 1) == [[b"GET", b"a"]]
