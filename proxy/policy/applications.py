"""Applications (rule K7): who a client is, and the policy engine that applies to it.

A policy's `applications:` section names each service that has applied for its Redis use: the
user it authenticates to the proxy as, its password's salted hash, the key prefixes it owns and
its own rule overrides. The loader turns each into an `Application` whose rules are already
merged and carry its K7 checks; `Tenants` compiles one `Engine` per application when the policy
loads, so a session only has to switch to its application's engine once, at AUTH. Checking a
password runs the slow hash (`check`, safe to run in a worker thread); credentials accepted once
are remembered (`cached`) so the next connections of the same client pool are answered at once.
No I/O here.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .passwords import PasswordHash, Verified

# Checked against when the user is unknown, so that a wrong user name costs what a wrong
# password costs and answers do not tell which user names exist.
_NOBODY = PasswordHash(14, 8, 1, b"\0" * 16, b"\0" * 32)


@dataclass(frozen=True)
class Application:
    name: str
    user: str
    password: PasswordHash
    prefixes: tuple[str, ...]
    read_only: bool
    rules: tuple  # the policy's rules with this application's overrides and K7 checks
    overrides: tuple[str, ...] = ()  # the rule ids its own `rules:` changes


class Tenants:
    """The applications of one policy, compiled: an engine per application, by user name."""

    def __init__(self, policy, table, engine_class):
        self.required = policy.auth == "required"
        self.applications = policy.applications
        self.by_user = {app.user.encode(): app for app in policy.applications}
        self.engines = {
            app.name: engine_class(dataclasses.replace(policy, rules=app.rules, applications=()), table)
            for app in policy.applications
        }
        self.verified = Verified()

    def tag(self, user: bytes, password: bytes) -> bytes:
        """The credentials as `cached` and `remember` know them (a keyed digest)."""
        return self.verified.tag(user, password)

    def cached(self, tag: bytes) -> Application | None:
        """The application these credentials were accepted for before, else None (unknown yet)."""
        return self.verified.get(tag)

    def check(self, user: bytes, password: bytes) -> Application | None:
        """The slow check: the application, or None for a wrong user or password."""
        app = self.by_user.get(user)
        ok = (app.password if app is not None else _NOBODY).matches(password)
        return app if ok and app is not None else None

    def remember(self, tag: bytes, app: Application) -> None:
        self.verified.add(tag, app)

    def engine(self, name: str):
        return self.engines.get(name)
