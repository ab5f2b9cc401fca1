"""LoginReply (proxy/upstream/relogin.py) judges the first reply behind a login, whole or cut
across reads: AUTH's +OK or HELLO's map pass; AUTH's refusal, or the marker's reply standing in
for the one Redis 7.2+ withheld, close the connection with the refusal. Socket-free."""

from __future__ import annotations

import pytest

from proxy import errors
from proxy.pending import Pending
from proxy.upstream.relogin import LoginReply, login_user


class Conn:
    label = "127.0.0.1:7000"

    def __init__(self):
        self.failed = None

    def fail(self, reason, refused=False, reply=None):
        self.failed = (reason, refused, reply)


MARKER_REPLY = b"$23\r\nredis-guard:after-login\r\n"
CASES = {
    "auth passes": (b"+OK\r\n", None),
    "hello passes": (b"*14\r\n$6\r\nserver\r\n", None),
    "resp3 hello passes": (b"%7\r\n$6\r\nserver\r\n", None),
    "auth refused": (errors.WRONGPASS, errors.WRONGPASS),
    "no password set": (b"-ERR AUTH <password> called without any password configured\r\n",
                        b"-ERR AUTH <password> called without any password configured\r\n"),
    "reply withheld": (MARKER_REPLY, errors.WRONGPASS),
    "withheld, marker refused": (b"-NOPERM User x has no permissions to run the 'ping' command\r\n",
                                 errors.WRONGPASS),
}


@pytest.mark.parametrize("cut", ["whole", "byte by byte"])
@pytest.mark.parametrize("case", CASES, ids=list(CASES))
def test_the_first_reply_behind_a_login(case, cut):
    reply, refusal = CASES[case]
    conn = Conn()
    receiver = LoginReply(conn, "app")
    entry = Pending(receiver, 1)
    pieces = [reply] if cut == "whole" else [reply[i:i + 1] for i in range(len(reply))]
    for i, piece in enumerate(pieces):
        receiver.deliver(entry, piece, 1 if i == len(pieces) - 1 else 0)
    assert entry.remaining == 0
    assert (conn.failed[2] if conn.failed else None) == refusal
    if refusal is not None:
        assert conn.failed[1] is True and conn.failed[0].startswith("login refused")


@pytest.mark.parametrize("command,user", [
    (("AUTH", "app", "pw"), "app"), (("AUTH", "pw"), "default"), (("HELLO", "3", "AUTH", "app", "pw"), "app"),
    (("HELLO", "3"), None), (("SELECT", "1"), None), (("AUTH",), None),
])
def test_which_commands_are_logins(command, user):
    assert login_user(command) == user
