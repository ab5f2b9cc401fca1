"""AUTH and HELLO read as Redis reads them (proxy/login.py); the error replies are compared with
a real redis-server in tests/integration/test_applications.py."""

import pytest

from proxy import errors
from proxy.login import parse_auth, parse_hello


def words(text: str) -> list[bytes]:
    return [word.encode() for word in text.split()]


@pytest.mark.parametrize("command, expected", [
    ("AUTH pw", (b"default", b"pw")),
    ("auth app pw", (b"app", b"pw")),
    ("AUTH", errors.AUTH_ARITY),
    ("AUTH a b c", errors.SYNTAX),
])
def test_auth(command, expected):
    login = parse_auth(words(command))
    assert (login if isinstance(login, bytes) else (login.user, login.password)) == expected
    if not isinstance(login, bytes):
        assert login.hello is None


@pytest.mark.parametrize("command, credentials, hello", [
    ("HELLO", (None, None), "HELLO"),
    ("HELLO 3", (None, None), "HELLO 3"),
    ("hello 2 AUTH app pw", (b"app", b"pw"), "hello 2"),
    ("HELLO 3 auth app pw SETNAME n", (b"app", b"pw"), "HELLO 3 SETNAME n"),
    ("HELLO 3 SETNAME n AUTH app pw", (b"app", b"pw"), "HELLO 3 SETNAME n"),
    ("HELLO 3 AUTH a 1 AUTH b 2", (b"b", b"2"), "HELLO 3"),  # the last one counts, as in Redis
])
def test_hello_keeps_everything_but_the_credentials(command, credentials, hello):
    login = parse_hello(words(command))
    assert (login.user, login.password) == credentials
    assert login.hello == words(hello)


@pytest.mark.parametrize("command, reply", [
    ("HELLO x", errors.HELLO_VERSION),
    ("HELLO 03", errors.HELLO_VERSION),
    ("HELLO 1", errors.NOPROTO),
    ("HELLO 4 AUTH a b", errors.NOPROTO),  # the version is checked first
    ("HELLO 3 AUTH a", b"-ERR Syntax error in HELLO option 'AUTH'\r\n"),
    ("HELLO 3 SETNAME", b"-ERR Syntax error in HELLO option 'SETNAME'\r\n"),
    ("HELLO 3 FOO", b"-ERR Syntax error in HELLO option 'FOO'\r\n"),
])
def test_hello_errors(command, reply):
    assert parse_hello(words(command)) == reply
