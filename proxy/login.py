"""AUTH and HELLO as redis-server 7 reads them, for a proxy that authenticates clients itself.

When the policy declares applications, a client's credentials are checked by the proxy and never
forwarded. These functions read the two commands exactly as Redis does (same arity, same order
of checks, same error texts) and say what is left to do: the credentials to check, and for
HELLO the command to run upstream once they pass, without them. Sans-IO.
"""

from __future__ import annotations

import hmac

from . import errors
from .session.behaviour import strict_int

DEFAULT_USER = b"default"  # `AUTH password` authenticates as this user, as in Redis


class Login:
    """A parsed AUTH or HELLO: `user`/`password` None when it carries no credentials; `hello`
    the HELLO to run upstream after them (None for AUTH)."""

    __slots__ = ("user", "password", "hello")

    def __init__(self, user, password, hello=None):
        self.user = user
        self.password = password
        self.hello = hello


def parse_auth(args: list[bytes]) -> Login | bytes:
    """A Login, or the error reply Redis gives."""
    if len(args) < 2:
        return errors.AUTH_ARITY
    if len(args) > 3:
        return errors.SYNTAX
    if len(args) == 2:
        return Login(DEFAULT_USER, args[1])
    return Login(args[1], args[2])


def parse_hello(args: list[bytes]) -> Login | bytes:
    """HELLO [protover [AUTH user pass] [SETNAME name]]: a Login whose `hello` has no AUTH, or
    the error reply Redis gives before it looks at credentials."""
    if len(args) == 1:
        return Login(None, None, [args[0]])
    version = strict_int(args[1])
    if version is None:
        return errors.HELLO_VERSION
    if not 2 <= version <= 3:
        return errors.NOPROTO
    user = password = None
    hello = [args[0], args[1]]
    index = 2
    while index < len(args):
        option = args[index].lower()
        more = len(args) - 1 - index
        if option == b"auth" and more >= 2:
            user, password = args[index + 1], args[index + 2]
            index += 3
        elif option == b"setname" and more >= 1:
            hello += [b"SETNAME", args[index + 1]]
            index += 2
        else:
            return errors.hello_option(args[index])
    return Login(user, password, hello)


def as_upstream(login: Login, bare: bool, user: str | None, password: str | None) -> bytes | None:
    """Without applications, in front of a Redis Cluster: the shared connections carry the
    proxy's one identity, so a client's credentials pass when they are the proxy's (`user`,
    `password`: the upstream's, None when it has none), as with twemproxy's `redis_auth`.
    None when they pass, else the reply Redis gives (`bare`: the one-argument AUTH)."""
    if password is None:  # the cluster's default user has no password
        if bare:
            return errors.AUTH_NOPASS
        return None if login.user == DEFAULT_USER else errors.WRONGPASS
    expected_user = (user or "default").encode()
    same = hmac.compare_digest(login.user, expected_user) & hmac.compare_digest(login.password, password.encode())
    return None if same else errors.WRONGPASS
