"""Which commands touch per-connection state, and what a client session does about each.

A client with no connection state shares upstream connections with other clients; the commands
named here would change or read state on the connection they run on, so they either move the
client to a shared pool for its new state (SELECT, HELLO 2/3) or pin it to a dedicated upstream
connection, where it gets exactly the semantics of its own Redis connection. Blocking commands
are found by the `blocking` flag in the command table, not listed by hand. The table is keyed by
command name bytes (lower and upper case precomputed) so the per-command decision is one dict
lookup; every known command is in it, mapped to PASS when it needs nothing. Under a policy, a
session's table maps the names the policy checks to a Guard instead (`dispatch_table`), so that
lookup also finds the command's plan.
"""

from __future__ import annotations

PASS = 0  # forward on the client's current upstream connection
PIN = 1  # needs a dedicated connection, then forwarded there
STREAM = 2  # dedicated connection whose replies are no longer paired with requests
SELECT = 3  # shared pool of another database
HELLO = 4  # shared pool of another protocol version, or PIN when it authenticates or names
QUIT = 5  # answered by the proxy: +OK, then the connection closes
SUBCOMMAND = 6  # decided by the subcommand (CLIENT ...)
TXN_BEGIN = 7  # MULTI on a dedicated connection: the policy checks what is queued
TXN_EXEC = 8  # EXEC: aborted when the policy rejected a queued command
TXN_DISCARD = 9
# When the policy declares applications the proxy authenticates clients itself:
LOGIN = 10  # AUTH, HELLO: answered (or rewritten without credentials) by the proxy
LOCKED = 11  # before authentication: NOAUTH, nothing forwarded
RESET = 12  # RESET: the client is no application again

# Commands whose effect lives on the connection they run on.
PINNING = {
    "multi": PIN,  # MULTI/EXEC queues on the connection; WATCH remembers keys for it
    "watch": PIN,
    "auth": PIN,
    "reset": PIN,
    "wait": PIN,  # waits for this connection's writes to replicate
    "waitaof": PIN,
    "readonly": PIN,
    "readwrite": PIN,
    "asking": PIN,
    "subscribe": STREAM,
    "psubscribe": STREAM,
    "ssubscribe": STREAM,
    # Unsubscribing answers once per channel, a count only the server knows.
    "unsubscribe": STREAM,
    "punsubscribe": STREAM,
    "sunsubscribe": STREAM,
    "monitor": STREAM,
    "sync": STREAM,
    "psync": STREAM,
    "select": SELECT,
    "hello": HELLO,
    "quit": QUIT,
    "client": SUBCOMMAND,
}

CLIENT_SUBCOMMANDS = {
    b"id": PIN,
    b"getname": PIN,
    b"setname": PIN,
    b"info": PIN,
    b"caching": PIN,
    b"no-evict": PIN,
    b"no-touch": PIN,
    b"getredir": PIN,
    b"trackinginfo": PIN,
    b"tracking": STREAM,  # invalidation messages arrive unasked
    b"reply": STREAM,  # OFF/SKIP break the one-reply-per-request pairing
}

# On a dedicated connection the client owns the state: only the unpaired streams and QUIT matter.
DEDICATED_OVERRIDES = {
    "select": PASS,
    "hello": PASS,
    "multi": TXN_BEGIN,
    "exec": TXN_EXEC,
    "discard": TXN_DISCARD,
    "watch": PASS,
    "auth": PASS,
    "reset": PASS,
    "wait": PASS,
    "waitaof": PASS,
    "readonly": PASS,
    "readwrite": PASS,
    "asking": PASS,
}


def both_cases(table: dict[str, int]) -> dict[bytes, int]:
    out = {}
    for name, action in table.items():
        out[name.encode()] = action
        out[name.upper().encode()] = action
    return out


def build_actions(command_names, blocking_names) -> tuple[dict[bytes, int], dict[bytes, int]]:
    """(shared, dedicated) action tables from the command table's names and blocking flags."""
    shared = {name: PASS for name in command_names}
    shared.update({name: PIN for name in blocking_names})
    shared.update(PINNING)
    dedicated = dict(shared)
    dedicated.update({name: PASS for name in blocking_names})
    dedicated.update(DEDICATED_OVERRIDES)
    return both_cases(shared), both_cases(dedicated)


LOGIN_ACTIONS = {"auth": LOGIN, "hello": LOGIN, "reset": RESET}
UNLOCKED = {**LOGIN_ACTIONS, "quit": QUIT}


def build_login_actions(shared: dict[bytes, int], dedicated: dict[bytes, int]):
    """(shared, dedicated, locked) action tables for a proxy that authenticates clients: the
    client's credentials never reach Redis. `locked` is for a client that has not authenticated
    yet; a name missing from it (an unknown command) is LOCKED too."""
    login = both_cases(LOGIN_ACTIONS)
    locked = {name: LOCKED for name in shared}
    locked.update(both_cases(UNLOCKED))
    return {**shared, **login}, {**dedicated, **login}, locked


class Guard:
    """A name's entry in a session's dispatch table when the policy checks the command: the
    engine's plan, what the session's loop reads of it, and the name's action once it passes."""

    __slots__ = ("plan", "action", "keys_only", "passed_before")

    def __init__(self, plan, action: int):
        self.plan = plan
        self.action = action
        self.keys_only = plan.keys_only
        # (args, session state) -> True when the command may go without the engine's decision
        self.passed_before = plan.passed_before or _decide_each


def _decide_each(args, state) -> bool:
    return False


def dispatch_table(actions: dict[bytes, int], plans: dict) -> dict:
    """`actions` with a Guard for every name in `plans` (a policy engine's name -> plan)."""
    if not plans:
        return actions
    table = dict(actions)
    for name, plan in plans.items():
        table[name] = Guard(plan, actions.get(name, PASS))
    return table


def client_action(args: list[bytes], dedicated: bool) -> int:
    if len(args) < 2:
        return PASS
    action = CLIENT_SUBCOMMANDS.get(args[1].lower(), PASS)
    if dedicated and action == PIN:
        return PASS
    return action


def strict_int(value: bytes) -> int | None:
    """Redis's string2ll: Python's int() also takes '+1', ' 1' and '1_0', which Redis refuses."""
    if not value or len(value) > 20:
        return None
    digits = value[1:] if value[:1] == b"-" else value
    if not digits.isdigit() or (digits[:1] == b"0" and len(value) != 1):
        return None
    return int(value)


def authenticates(args: list[bytes]) -> bool:
    """AUTH, or HELLO with an AUTH option."""
    name = args[0].lower()
    if name == b"auth":
        return True
    return name == b"hello" and any(arg.lower() == b"auth" for arg in args[2:])
