"""The proxy's own AUTH: a client's credentials are checked here and never forwarded, so the
proxy alone decides who its upstream connections are (its URL's user, or the policy's ACL users).

`login` reads AUTH and HELLO as Redis does (`proxy/login.py`). When the policy declares
applications it checks the credentials against them (a slow scrypt hash, run in a worker thread
while the client's later requests wait in order; good credentials are remembered for the next
connections of the same client pool) and binds the session to its application's engine. Without
applications, credentials pass when they are the upstream URL's (as twemproxy's `redis_auth`;
`login.as_upstream`), and the client stays where it was. HELLO then runs upstream without the
credentials (its reply is Redis's own). A failure is answered late and closes the connection
after a few (`throttle.py`: the failing connection waits, never its neighbours).
"""

from __future__ import annotations

import functools
import logging

import hiredis

from .. import errors
from ..login import as_upstream, parse_auth, parse_hello
from ..throttle import THROTTLE
from . import streamend
from .behaviour import HELLO
from .states import HELD, PASSWORD, STREAMING, WAITING

log = logging.getLogger("redis_guard.auth")
BRAKED = object()  # a login_result's outcome: failed, its wait over; WRONGPASS now


def login(session, batch, index: int) -> int:
    args = batch.commands[index]
    is_auth = args[0].lower() == b"auth"
    parsed = parse_auth(args) if is_auth else parse_hello(args)
    if isinstance(parsed, bytes):
        if not is_auth and session.state.lane is STREAMING and session.proxy.tenants is None:
            from ..backends.base import StreamRoute  # (here: tests/meta/test_import_cycles.py KNOWN)

            if type(session.route) is StreamRoute:
                # Redis answers it in the stream's context (a RESP2 subscriber: "only (P|S)SUBSCRIBE
                # ... allowed"); it fails there too, so nothing changes, and no credentials go.
                session.route.conn.send(hiredis.pack_command(tuple(without_credentials(args))), None)
                return index + 1
        session.answer_locally(parsed)
        return index + 1
    if parsed.user is not None:
        done = session.login_result
        if done is not None and done[0] is args and done[1] is BRAKED:
            return refused(session, index)
        if session.proxy.tenants is None:
            identity = session.backend.default_identity
            refusal = as_upstream(parsed, is_auth and len(args) == 2, identity[0], identity[1])
            if refusal == errors.WRONGPASS:
                return brake(session, batch, index, parsed.user)
            if refusal is not None:  # AUTH <password> with none configured: no guess to slow down
                session.answer_locally(refusal)
                return index + 1
            # Passed: the client stays on the proxy's connections, as the user they run as.
        else:
            app = check(session, batch, index, parsed)
            if app == HELD:
                return HELD
            if app is None:
                return brake(session, batch, index, parsed.user)
            if app != session.app:
                if session.state.lane is STREAMING and session.backend.acl_users is not None:
                    # The stream's connection runs as the application's ACL user; logging it in
                    # again there would put AUTH's reply among the stream's, unpaired.
                    session.answer_locally(errors.RELOGIN_ON_STREAM)
                    return index + 1
                if session.inflight and session.backend.acl_users is not None:
                    # Its later commands run as another upstream user, on other connections: they
                    # go once the commands it sent before are answered, in the order it sent them.
                    return session.wait(batch, index)
                session.app = app
                session.backend.identity_changed(session)
                session.bind()
    elif session.locked:
        version = getattr(session.proxy.command_table, "redis_version", None) or ""
        session.answer_locally(
            errors.NOAUTH_HELLO_8 if version[:2] not in ("", "5.", "6.", "7.") else errors.NOAUTH_HELLO)
        return index + 1
    if is_auth:
        session.answer_locally(errors.OK)
        return index + 1
    if session.proxy.tenants is None:
        if parsed.user is None:  # no credentials: HELLO as the client's lane takes it
            return session.redispatch(batch, index, session.backend.lane_action(session, HELLO))

        from ..backends.base import StreamRoute  # (here: tests/meta/test_import_cycles.py KNOWN)

        if type(session.route) is StreamRoute:  # as every command on the stream, credentials taken out
            streamend.passes(session, parsed.hello, session.route.neutral)
            session.route.conn.send(hiredis.pack_command(tuple(parsed.hello)), None)
            return index + 1
    return session.backend.hello(session, batch, index, parsed.hello)


def without_credentials(args: list[bytes]) -> list[bytes]:
    """A HELLO with the user and password after each AUTH option masked."""
    out = list(args)
    for at in range(2, len(out)):
        if out[at].lower() == b"auth":
            for value in range(at + 1, min(at + 3, len(out))):
                out[value] = b"-"
    return out


def brake(session, batch, index: int, user: bytes) -> int:
    """Wrong credentials: WRONGPASS once the brake's wait is over; the client's later requests
    wait behind it, in order."""
    session.auth_failures += 1
    wait = THROTTLE.failed(session.peer, user, session.auth_failures)
    session.login_result = (batch.commands[index], BRAKED)
    if wait <= 0:
        return refused(session, index)
    session.verifying = True
    session.loop.call_later(wait, braked, session)
    return session.wait(batch, index, PASSWORD)


def braked(session) -> None:
    session.verifying = False
    if session.state.life is WAITING:
        session.resume_dispatch()


def refused(session, index: int) -> int:
    """WRONGPASS; after the last failure the brake allows, the connection closes."""
    session.login_result = None
    session.answer_locally(errors.WRONGPASS)
    if THROTTLE.closes(session.auth_failures):
        log.warning("client %s: %d failed AUTH attempts on one connection: closing it", session.describe(),
                    session.auth_failures)
        session.input_ended = True
        session.close_after_replies()
    return index + 1


def check(session, batch, index: int, parsed):
    """The application name for these credentials, None when wrong, or HELD while the slow hash
    runs in a worker thread (the client's later requests wait, in order)."""
    args = batch.commands[index]
    done = session.login_result
    if done is not None and done[0] is args:  # dispatched again after a switch or the check
        return done[1]
    proxy = session.proxy
    tenants = proxy.tenants
    tag = tenants.tag(parsed.user, parsed.password)
    app = tenants.cached(tag)
    if app is not None:
        session.login_result = (args, app.name)
        return app.name
    session.verifying = True
    # Connections of one client pool arrive together with the same credentials: one check.
    future = proxy.checks.get(tag)
    if future is None:
        future = proxy.checks[tag] = session.loop.run_in_executor(None, tenants.check, parsed.user,
                                                                  parsed.password)
        future.add_done_callback(functools.partial(proxy.checked, tenants, tag))
    future.add_done_callback(functools.partial(checked, session, args))
    return session.wait(batch, index, PASSWORD)


def checked(session, args, future) -> None:
    app = None if future.cancelled() or future.exception() is not None else future.result()
    session.login_result = (args, app.name if app is not None else None)
    session.verifying = False
    if session.state.life is WAITING:
        session.resume_dispatch()
