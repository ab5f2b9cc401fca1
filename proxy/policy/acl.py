"""The second wall: what of a policy Redis's own ACL can enforce, compiled into ACL users.

The proxy checks every command a client sends; inside a server-side script or function (EVAL,
FCALL) it sees nothing. Redis checks a user's ACL on every command, scripts' included. So the
policy is compiled into one ACL user per application and one for clients of no application, and
the proxy's upstream connections for those clients run as them (the backend's part):

* commands: `+@all`, then `-name` (or `-container|sub`) for every command of the command table
  that an enforced rule refuses whatever its arguments (`CommandRule.denies`: C1, C2 with its
  baseline, C5, C6 `scripts: deny`, C3 `reject`, K7's read-only and RANDOMKEY/SWAPDB/MOVE/SELECT),
  exactly as the proxy decides, subcommand by subcommand; except what the proxy itself sends on
  the client's behalf (`ALWAYS_KEEP`, and each enforced rule's `server_commands`: its EVAL and the
  reads inside its script), so a command the proxy refuses may still run inside the proxy's own
  scripts;
* keys: an application's prefixes as `~prefix*` (glob characters escaped), `%R~prefix*` for a
  read-only one; a client of no application under K7 `anonymous: reject` gets no key, everyone
  else `~*`. Redis 7 then also refuses SORT ... BY/GET to users limited to some keys;
* channels: an application's prefixes as `&prefix*`, like its keys, and the proxy's own
  `__redis_guard__:*` (the PUBLISH that marks a WAIT's place); `&*` for the others.

What ACL cannot express stays the proxy's alone: key names (K1-K6, K8-K11), TTLs (T1-T3), sizes
(V1-V3), a script's undeclared keys inside the application's prefixes.

User names and passwords are deterministic, so that every proxy process in front of the same
Redis (`--workers`, several instances) computes the same ones: `redis-guard:<policy>` for clients
of no application, `redis-guard:<policy>:<application>` (names with `:`, spaces and other bytes
outside `[A-Za-z0-9._-]` written `%XX`); the password is HMAC-SHA256(key = the upstream URL's
password, message = "redis-guard acl v1" NUL user name), in hex. Whoever knows the upstream
password can compute them, which gives nothing that password does not already give; with no
upstream password they are public, and the users are a wall, not a secret. Redis stores only the
password's SHA-256 (`#<hash>` in ACL SETUSER); the clear password is used to authenticate only.
Sans-IO: `upstream_acl.py` applies the users.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

from .base import AUDIT, ENFORCE
from .rules._keyshape import glob_escape

USER_PREFIX = "redis-guard"
SCHEME = b"redis-guard acl v1\0"
# What the proxy sends on every upstream connection for its clients: its own start-up (AUTH,
# HELLO, SELECT, CLIENT ID), cluster redirections (ASKING, READONLY), a transaction it discards,
# the name a lent connection takes, and the PUBLISH that marks a WAIT's place (`WAIT_CHANNELS`).
ALWAYS_KEEP = frozenset({"auth", "hello", "select", "readonly", "readwrite", "asking", "ping", "multi", "exec",
                         "discard", "reset", "quit", "client|id", "client|setname", "client|getname", "publish"})
WAIT_CHANNELS = "&__redis_guard__:*"


@dataclass(frozen=True)
class AclUser:
    name: str
    app: str | None  # the application; None: clients of no application
    password: str  # derived (see the module's docstring); never printed
    rules: tuple[str, ...]  # what follows the name in ACL SETUSER, `reset` first

    def setuser(self) -> tuple[str, ...]:
        return ("ACL", "SETUSER", self.name, *self.rules)

    def line(self) -> str:
        """The user as an ACL file line (`user <name> <rules>`); ACL SETUSER takes the same rules."""
        return " ".join(("user", self.name, *self.rules))


class AclUsers:
    """The compiled users of one policy: `credentials_for(app)` for the upstream connections."""

    def __init__(self, policy_name: str, users: tuple[AclUser, ...], audit: bool = False):
        self.policy_name = policy_name
        self.users = users
        self.audit = audit  # the policy is a dry run: nothing to enforce, upstream either
        self.by_app = {user.app: user for user in users}

    def credentials_for(self, app: str | None) -> tuple[str, str]:
        """(user, password) for the upstream connections of a client of `app` (None: of no
        application)."""
        user = self.by_app.get(app) or self.by_app[None]
        return user.name, user.password

    def owns(self, name: str) -> bool:
        """Is `name` a user this policy creates (now or in a version with other applications)?"""
        own = user_name(self.policy_name, None)
        return name == own or name.startswith(own + ":")

    def stale(self, existing) -> list[str]:
        """Users of this policy on the server that it no longer compiles (removed applications)."""
        current = {user.name for user in self.users}
        return [name for name in existing if self.owns(name) and name not in current]


def _safe(text: str) -> str:
    return "".join(c if c.isascii() and (c.isalnum() or c in "._-") else
                   "".join(f"%{b:02X}" for b in c.encode("utf-8")) for c in text)


def user_name(policy: str, app: str | None) -> str:
    base = f"{USER_PREFIX}:{_safe(policy)}"
    return base if app is None else f"{base}:{_safe(app)}"


def password_for(name: str, upstream_password: str | None) -> str:
    key = (upstream_password or "").encode("utf-8")
    return hmac.new(key, SCHEME + name.encode("utf-8"), hashlib.sha256).hexdigest()


def compile_users(engine, upstream_password: str | None) -> AclUsers:
    """The ACL users of a policy engine (its applications' engines included)."""
    policy = engine.policy
    users = [_user(engine, policy, None, upstream_password)]
    for app in policy.applications:
        users.append(_user(engine.tenants.engine(app.name), policy, app, upstream_password))
    return AclUsers(policy.name, tuple(users), policy.mode == AUDIT)


def _user(engine, policy, app, upstream_password) -> AclUser:
    name = user_name(policy.name, app.name if app is not None else None)
    password = password_for(name, upstream_password)
    rules = ["reset", "on", "#" + hashlib.sha256(password.encode()).hexdigest()]
    rules += namespaces(engine, policy, app)
    rules.append("+@all")
    rules += [f"-{command}" for command in denied_commands(engine)]
    return AclUser(name, app.name if app is not None else None, password, tuple(rules))


def namespaces(engine, policy, app) -> list[str]:
    """Key and channel patterns: the application's prefixes when K7 is enforced."""
    if engine.modes.get("K7") != ENFORCE:
        return ["~*", "&*"]
    if app is None:
        return [WAIT_CHANNELS] if policy.rule("K7").anonymous == "reject" else ["~*", "&*"]
    patterns = [glob_escape(prefix.encode()).decode("utf-8", "surrogateescape") + "*" for prefix in app.prefixes]
    keys = [("%R~" if app.read_only else "~") + pattern for pattern in patterns]
    return keys + ["&" + pattern for pattern in patterns] + [WAIT_CHANNELS]


def denied_commands(engine) -> list[str]:
    """Every command (or subcommand) an enforced rule of `engine` refuses whatever its arguments,
    minus what the proxy sends itself; a container whose every subcommand is refused as a whole."""
    rules = [rule for rule in engine.command_rules if engine.modes.get(rule.id) == ENFORCE]
    keep = set(ALWAYS_KEEP)
    for rule in (*engine.command_rules, *engine.rewrite_rules):
        if engine.modes.get(rule.id) == ENFORCE:
            keep |= rule.server_commands
    out = []
    for spec in engine.table:
        if spec.subcommands:
            subs = [sub.name for sub in spec.subcommands.values() if _refused(rules, sub, keep)]
            out += [spec.name] if len(subs) == len(spec.subcommands) else subs
        elif _refused(rules, spec, keep):
            out.append(spec.name)
    return out


def _refused(rules, spec, keep) -> bool:
    return spec.name not in keep and any(rule.denies(spec) for rule in rules)
