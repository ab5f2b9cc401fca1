"""AUTH and HELLO read as Redis reads them (proxy/login.py); the error replies are compared with
a real redis-server in tests/integration/test_applications.py."""

import pytest

from proxy import errors
from proxy.login import as_upstream, parse_auth, parse_hello
from proxy.session.auth import without_credentials


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


@pytest.mark.parametrize("args, user, password, reply", [
    ([b"AUTH", b"pw"], None, "pw", None),
    ([b"AUTH", b"default", b"pw"], None, "pw", None),
    ([b"AUTH", b"pw"], "default", "pw", None),
    ([b"AUTH", b"app", b"pw"], "app", "pw", None),
    ([b"AUTH", b"pw"], "app", "pw", errors.WRONGPASS),  # AUTH pw is the default user's
    ([b"AUTH", b"other"], None, "pw", errors.WRONGPASS),
    ([b"AUTH", b"someone", b"pw"], None, "pw", errors.WRONGPASS),
    ([b"AUTH", b"pw"], None, None, errors.AUTH_NOPASS),
    ([b"AUTH", b"default", b"anything"], None, None, None),
    ([b"AUTH", b"someone", b"anything"], None, None, errors.WRONGPASS),
])
def test_credentials_pass_when_they_are_the_upstreams(args, user, password, reply):
    login = parse_auth(args)
    assert as_upstream(login, len(args) == 2, user, password) == reply


@pytest.mark.parametrize("args, sent", [
    ([b"HELLO", b"x"], [b"HELLO", b"x"]),
    ([b"HELLO", b"3", b"AUTH", b"u", b"secret", b"BAD"], [b"HELLO", b"3", b"AUTH", b"-", b"-", b"BAD"]),
    ([b"HELLO", b"3", b"auth", b"u"], [b"HELLO", b"3", b"auth", b"-"]),
    ([b"HELLO", b"9", b"SETNAME", b"n", b"AUTH", b"u", b"p"], [b"HELLO", b"9", b"SETNAME", b"n", b"AUTH", b"-", b"-"]),
])
def test_a_refused_hello_sent_on_a_stream_carries_no_credentials(args, sent):
    assert without_credentials(args) == sent
