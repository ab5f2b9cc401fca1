"""The proxy's own AUTH, when the policy declares applications: credentials checked here, never
forwarded.

`login` reads AUTH and HELLO as Redis does (`proxy/login.py`), checks the credentials against
the applications (a slow scrypt hash, run in a worker thread while the client's later requests
wait in order; good credentials are remembered for the next connections of the same client
pool) and binds the session to its application's engine. HELLO then runs upstream without the
credentials (its reply is Redis's own).
"""

from __future__ import annotations

import functools

from .. import errors
from ..login import parse_auth, parse_hello
from ..throttle import THROTTLE
from .states import HELD, PASSWORD, STREAMING, WAITING


def login(session, batch, index: int) -> int:
    args = batch.commands[index]
    is_auth = args[0].lower() == b"auth"
    parsed = parse_auth(args) if is_auth else parse_hello(args)
    if isinstance(parsed, bytes):
        session._local(parsed)
        return index + 1
    if parsed.user is not None:
        app = check(session, batch, index, parsed)
        if app == HELD:
            return HELD
        if app is None:
            session._local(errors.WRONGPASS)
            return index + 1
        if app != session.app:
            if session.state.lane is STREAMING and session.backend.acl_users is not None:
                # The stream's connection runs as the application's ACL user; logging it in again
                # there would put AUTH's reply among the stream's, unpaired.
                session._local(errors.RELOGIN_ON_STREAM)
                return index + 1
            if session.inflight and session.backend.acl_users is not None:
                # Its later commands run as another upstream user, on other connections: they
                # go once the commands it sent before are answered, in the order it sent them.
                return session.wait(batch, index)
            session.app = app
            session.backend.identity_changed(session)
            session.bind()
    elif session.locked:
        session._local(errors.NOAUTH_HELLO)
        return index + 1
    if is_auth:
        session._local(errors.OK)
        return index + 1
    return session.backend.hello(session, batch, index, parsed.hello)


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
        # After this address's turn: failed attempts slow down (`throttle.py`).
        future = proxy.checks[tag] = THROTTLE.check(session.loop, session.peer, tenants.check, parsed.user,
                                                    parsed.password)
        future.add_done_callback(functools.partial(proxy.checked, tenants, tag))
    future.add_done_callback(functools.partial(checked, session, args))
    return session.wait(batch, index, PASSWORD)


def checked(session, args, future) -> None:
    app = None if future.cancelled() or future.exception() is not None else future.result()
    session.login_result = (args, app.name if app is not None else None)
    session.verifying = False
    if session.state.life is WAITING:
        session._resume()
