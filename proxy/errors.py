"""Every error reply the proxy writes itself, in one place.

Replies that Redis would send (protocol errors) keep Redis's exact text, in `resp.exact`; the ones
here are the proxy's own. Each is a complete RESP error line, ready to write. At the end: the
advice texts of `redis-guard audit`'s findings that no policy rule words itself.
"""

from __future__ import annotations

import re
from typing import NamedTuple


def resp_error(text: str) -> bytes:
    """A RESP error line; CR/LF inside the text would end the line early, so they become spaces."""
    return b"-" + text.replace("\r", " ").replace("\n", " ").encode("utf-8", "replace") + b"\r\n"


# A socket address as Python's errors print it: ('10.0.0.7', 7001), or ('::1', 7001, 0, 0)
_SOCKADDR = re.compile(r"\('[^']*', \d+(?:, \d+, \d+)?\)")


def unnamed(reason: str, address: str) -> str:
    """`reason` without the upstream's address: the client is never told where the proxy's
    upstream is (issue 52: one face; the address is operator configuration, in the proxy's log
    lines). `address` as `config.Address` prints it, host:port or [host]:port."""
    if address:
        reason = reason.replace(address, "the upstream")
        host, _, port = address.rpartition(":")
        if host.startswith("["):
            host = host[1:-1]
        if host and port:
            reason = reason.replace(f"{host}:{port}", "the upstream")
    return _SOCKADDR.sub("(the upstream)", reason)


def upstream_unavailable(address: str, reason: str) -> bytes:
    """`address` (a node, the server, the Sentinel's master) is for the log only: named nowhere."""
    return resp_error(f"ERR upstream unavailable: {unnamed(reason, address)}")


def upstream_lost(address: str, reason: str) -> bytes:
    return resp_error(
        f"ERR upstream connection lost before the reply ({unnamed(reason, address)}); "
        "the command may or may not have run"
    )


def request_timed_out(seconds: float) -> bytes:
    return resp_error(f"ERR upstream did not answer within request_timeout {seconds:g}s; "
                      "the command may or may not have run")


def shutting_down() -> bytes:
    return resp_error("ERR upstream proxy is shutting down")


OK = b"+OK\r\n"
PONG = b"+PONG\r\n"


def _redis_error(text: bytes) -> bytes:
    """An error line as redis-server words it: the client's bytes as they are, CR/LF as spaces."""
    return b"-" + text.replace(b"\r", b" ").replace(b"\n", b" ") + b"\r\n"


def unknown_command(args) -> bytes:
    """Redis's reply to a command it does not have (each argument cut to what fits in 128 bytes)."""
    shown = b""
    for arg in args[1:]:
        if len(shown) >= 128:
            break
        shown += b"'" + arg[:128 - len(shown)] + b"' "
    return _redis_error(b"ERR unknown command '%s', with args beginning with: %s" % (args[0][:128], shown))


def unknown_subcommand(args) -> bytes:
    return _redis_error(b"ERR unknown subcommand '%s'. Try %s HELP." % (args[1][:128], args[0].upper()))


def wrong_arity(full_name: str) -> bytes:
    """`full_name` as Redis names the command: 'get', 'client|kill'."""
    return resp_error(f"ERR wrong number of arguments for '{full_name}' command")


def config_set_requirepass() -> bytes:
    """CONFIG SET requirepass through the proxy: its own new connections would be refused (NOAUTH)."""
    return resp_error("ERR CONFIG SET requirepass is refused by Redis Guard: the proxy's own connections log in "
                      "with the password of its upstream settings, and new ones would get NOAUTH; set the "
                      "password on the servers directly and in the proxy's upstream settings, then reload it")


def not_supported(args, kind: str) -> bytes:
    """A command that has no faithful meaning through the proxy in front of this kind of upstream."""
    name = args[0].decode("utf-8", "replace").upper()
    if len(args) > 1 and name in ("CLIENT", "SCRIPT", "FUNCTION", "CONFIG", "OBJECT", "MEMORY"):
        name += " " + args[1].decode("utf-8", "replace").upper()
    return resp_error(f"ERR {name} is not supported through Redis Guard in front of a Redis {kind}: "
                      "the proxy shares its connections to the nodes between clients")


def not_in_transaction(args) -> bytes:
    name = " ".join(arg.decode("utf-8", "replace").upper() for arg in args[:2])
    return resp_error(f"ERR {name} inside MULTI is not supported through Redis Guard: it would run at EXEC, "
                      "where it could reach connections the proxy shares; send it outside the transaction")


AUTH_IN_TRANSACTION = resp_error(
    "ERR AUTH inside MULTI is not supported through Redis Guard: the proxy answers AUTH itself (credentials "
    "never reach Redis), so it cannot run at EXEC; authenticate before MULTI")

HELLO2_SUBSCRIBED = resp_error(
    "ERR HELLO 2 while subscribed in RESP3 is not supported through Redis Guard with options or in front of a "
    "Redis Cluster (the server would send the subscriptions' messages as RESP2 replies): unsubscribe from every "
    "channel, pattern and shard channel first, or send RESET")


def stream_other_master(args) -> bytes:
    """In front of a cluster, on a connection that streams: a command of a key another master owns
    that could not run apart from the stream (in a transaction, or one that blocks or holds state)."""
    name = args[0].decode("utf-8", "replace").upper()
    return resp_error(f"ERR {name} of a key another master owns is not supported through Redis Guard on a "
                      "connection that streams in front of a Redis Cluster (CLIENT TRACKING, CLIENT REPLY, MONITOR; "
                      "in a transaction, or blocking or holding state there): send it on a connection that does not")


def stream_while_subscribed(args) -> bytes:
    """In front of a cluster: a command that would stream on one master while a RESP3 client's
    channels, patterns and shard channels live on connections of their own."""
    name = " ".join(arg.decode("utf-8", "replace").upper() for arg in args[:2 if args[0].lower() == b"client" else 1])
    return resp_error(f"ERR {name} while subscribed in RESP3 is not supported through "
                      "Redis Guard in front of a Redis Cluster: unsubscribe first, send RESET, or use a "
                      "connection of its own for it")


# CLIENT TRACKING ... REDIRECT to an id that is no connection of the same client (session/
# tracking.py; in front of a cluster, no session of the same client: cluster/redirects.py):
# Redis's own words for an id that does not exist, which is what the client may know of it. The
# same answer whether the id exists on the server or not, so ids cannot be enumerated through it.
TRACKING_NO_SUCH_CLIENT = b"-ERR The client ID you want redirect to does not exist\r\n"
# In front of a cluster, REDIRECT to a session of the same client (cluster/redirects.py): not inside
# MULTI (the sink must be named before the command is queued), and a few sinks per client at most.
TRACKING_REDIRECT_MULTI = resp_error(
    "ERR CLIENT TRACKING REDIRECT inside MULTI is not supported through redis-guard in front of a Redis "
    "Cluster: send it outside the transaction")
TRACKING_MULTI = resp_error(
    "ERR CLIENT TRACKING inside MULTI is not supported through redis-guard in front of a Redis Cluster: its "
    "options must reach the client's connection on every master; send it outside the transaction")
TRACKING_REDIRECT_MANY = resp_error(
    "ERR too many CLIENT TRACKING REDIRECT targets on this connection through redis-guard in front of a Redis "
    "Cluster (after CLIENT REPLY OFF the earlier ones stay open until the stream ends): send RESET first")


def client_setinfo(args) -> bytes:
    """CLIENT SETINFO as Redis 7.2 checks it; the proxy answers it without storing it."""
    if len(args) != 4:
        return resp_error("ERR wrong number of arguments for 'client|setinfo' command")
    attr = args[2].lower()
    if attr not in (b"lib-name", b"lib-ver"):
        return resp_error(f"ERR Unrecognized option '{args[2].decode('utf-8', 'replace')}'")
    if any(c < 33 or c > 126 for c in args[3]) or (attr == b"lib-name" and b" " in args[3]):
        return resp_error(f"ERR {attr.decode()} cannot contain spaces, newlines or special characters.")
    return OK


def violation_text(finding) -> str:
    """The text of a policy rejection, without the leading '-': NOPERM is what clients already
    map to a permission error."""
    return f"NOPERM {finding.subject} breaks rule {finding.rule} ({finding.title}): {finding.advice}"


_VIOLATION = re.compile(rb"-NOPERM (.*) breaks rule (\w+) \((.*?)\): (.*)\r\n", re.S)


class Violation(NamedTuple):
    """A policy rejection read back from its text: the fields of the policy's Finding
    (policy/base.py) that `violation_text` wrote."""

    rule: str
    title: str
    subject: str
    advice: str
    mode: str = "enforce"


def parse_violation(reply: bytes) -> Violation | None:
    """The rejection behind a NOPERM reply a policy script sent, or None."""
    match = _VIOLATION.match(reply)
    if match is None:
        return None
    subject, rule, title, advice = (part.decode("utf-8", "replace") for part in match.groups())
    return Violation(rule, title, subject, advice)


def policy_violation(finding) -> bytes:
    return resp_error(violation_text(finding))


EXECABORT = b"-EXECABORT Transaction discarded because of previous errors.\r\n"


def needs_paired_replies(args, rules) -> bytes:
    """A command the policy makes compliant with commands of its own after it (T1's EXPIRE), on
    a connection whose replies are no longer paired, where the proxy cannot send them unseen."""
    name = args[0].decode("utf-8", "replace").upper()
    rules = ", ".join(f"rule {rule.id}" for rule in rules) or "the policy"
    return resp_error(f"NOPERM command {name} needs {rules}'s command after it, which the proxy cannot add on a "
                      "connection that streams (pub/sub, MONITOR, CLIENT REPLY; tracking in a cluster): send it on a "
                      "connection that does not, or once it has unsubscribed from every channel and pattern or "
                      "sent RESET")


# -- the advice of rule K10 (key schema) and of the per-pattern TTL and limits ------------------


def schema_unknown_key(closest, reason: str) -> str:
    """A key that no pattern of the schema matches; `closest` is the pattern it was probably
    meant for (None when there is no guess), `reason` the placeholder it fails."""
    if closest is None:
        return ("no pattern of the key schema matches it: name it after a declared pattern, "
                "or declare it under 'schema:'")
    why = f", but {reason}" if reason else ""
    return (f"no pattern of the key schema matches it; the closest is '{closest.pattern}' ({closest.type}){why}: "
            "name it after a declared pattern, or declare it under 'schema:'")


def schema_wrong_type(command: str, family: str, pattern) -> str:
    """A command of one type family on a key the schema declares of another type."""
    return (f"{command} is a {family} command but the schema declares '{pattern.pattern}' a {pattern.type}: "
            f"use {pattern.type} commands on it, or name the key after a {family} pattern")


def schema_carried_type(command: str, source, pattern) -> str:
    """COPY/RENAME of a key to a name the schema declares of another type."""
    return (f"{command} would move the {source.type} of '{source.pattern}' to a key the schema declares a "
            f"{pattern.type} ('{pattern.pattern}'): copy or rename it to a {source.type} pattern")


def schema_limit(advice: str, pattern) -> str:
    """A V1/V2 limit, or a T3 bound, that comes from a schema pattern rather than the rule."""
    return f"{advice} (schema pattern '{pattern.pattern}')"
# -- redis-guard audit: findings on stored keys that no rule of the policy words itself ----------

AUDIT_TITLES = {
    "O1": "keys without TTL",
    "V1": "string size",
    "V2": "collection size",
    "K10": "key schema",
}


def audit_no_ttl() -> str:
    return ("no TTL: Redis is a cache (O1), the key is never evicted by expiry; give it one with "
            "EXPIRE, or declare its pattern persistent")


def audit_ttl_required() -> str:
    return ("no TTL, and the policy requires one: give it one with EXPIRE, or list its pattern in "
            "T1's persistent")


def audit_big_string(size: int, limit: int) -> str:
    return f"a string of {size} bytes: keep string values at most {limit} bytes (split it, or store a hash)"


def audit_big_collection(kind: str, count: int, limit: int) -> str:
    return f"a {kind} of {count} elements: keep it at most {limit} elements (shard it by a key segment)"


def audit_ttl_above(left: str, limit: str) -> str:
    """`left` and `limit` in words (`approximately`, policy/rules/_durations.py)."""
    return f"a TTL of {left} left, above the policy's max_ttl of {limit}: set a shorter one with EXPIRE"


def audit_schema_unmatched() -> str:
    return "matches no pattern of the key schema: rename it to a documented pattern, or document it"


def audit_schema_type(pattern: str, declared: str, kind: str) -> str:
    return (f"pattern '{pattern}' declares a {declared} but the key holds a {kind}: "
            f"use {declared} commands or another pattern")


def audit_schema_size(pattern: str, size: int, limit: int, unit: str) -> str:
    return f"{size} {unit}, above the {limit} {unit} pattern '{pattern}' allows"


def audit_schema_ttl(pattern: str, ttl) -> str:
    return f"no TTL, but pattern '{pattern}' declares its TTL: {ttl}: give it one with EXPIRE"


# Redis's own replies, for the AUTH and HELLO the proxy answers when it authenticates clients.
NOAUTH = b"-NOAUTH Authentication required.\r\n"
MAX_CLIENTS = b"-ERR max number of clients reached\r\n"  # as Redis answers past its maxclients
NOAUTH_HELLO = (b"-NOAUTH HELLO must be called with the client already authenticated, otherwise the "
                b"HELLO AUTH <user> <pass> option can be used to authenticate the client and select the "
                b"RESP protocol version at the same time\r\n")
# Redis 8 names the protocol argument in it (issue 52): answered as the upstream's release words it.
NOAUTH_HELLO_8 = NOAUTH_HELLO.replace(b"HELLO AUTH <user>", b"HELLO <proto> AUTH <user>")
WRONGPASS = b"-WRONGPASS invalid username-password pair or user is disabled.\r\n"
RELOGIN_ON_STREAM = (b"-ERR AUTH as another application is not possible on a connection that streams (pub/sub, "
                     b"MONITOR, CLIENT REPLY, tracking) with upstream_acl on: open a new connection for it\r\n")
AUTH_ARITY = b"-ERR wrong number of arguments for 'auth' command\r\n"
AUTH_NOPASS = (b"-ERR AUTH <password> called without any password configured for the default user. "
               b"Are you sure your configuration is correct?\r\n")
SYNTAX = b"-ERR syntax error\r\n"
HELLO_VERSION = b"-ERR Protocol version is not an integer or out of range\r\n"
NOPROTO = b"-NOPROTO unsupported protocol version\r\n"
RESET = b"+RESET\r\n"


def hello_option(option: bytes) -> bytes:
    return resp_error(f"ERR Syntax error in HELLO option '{option.decode('utf-8', 'replace')}'")


def unknown_node(node_id: bytes) -> bytes:
    """Redis's reply to CLUSTER REPLICAS/COUNT-FAILURE-REPORTS naming no node it knows."""
    return _redis_error(b"ERR Unknown node %s" % node_id[:128])


def cluster_face_refused(sub: bytes, reshaping: bool) -> bytes:
    """A CLUSTER subcommand the proxy's one-node cluster face (face: cluster) does not pass on."""
    name = sub.decode("utf-8", "replace").upper()
    if reshaping:
        return resp_error(f"ERR CLUSTER {name} is not available through redis-guard: it presents the cluster "
                          "as one node (face: cluster); change the cluster on its nodes directly")
    return resp_error(f"ERR CLUSTER {name} is not available through redis-guard's one-node cluster face "
                      "(face: cluster)")


def presented_in_multi(args) -> bytes:
    """INFO, ROLE, CONFIG GET, ACL LOG, CLIENT INFO/LIST queued in MULTI in front of a cluster: the
    node of the transaction would answer them at EXEC, naming itself (cluster/presented.py)."""
    name = b" ".join(args[:2] if args[0].lower() in (b"config", b"client", b"acl") and len(args) > 1 else args[:1])
    return resp_error(f"ERR {name.decode('utf-8', 'replace').upper()[:64]} inside MULTI is not available through "
                      "redis-guard in front of a Redis Cluster (one node of the cluster would answer it): send it "
                      "outside the transaction")


CLUSTER_FACE_IN_MULTI = resp_error(
    "ERR CLUSTER commands are answered by redis-guard's one-node cluster face (face: cluster), "
    "not inside MULTI: send them outside the transaction")


def slot_moving(args, where: str) -> bytes:
    """In front of a cluster: a node answered MOVED/ASK (the key's slot is migrating, or moved before
    the proxy's map learnt it) where the proxy cannot send the command to the new owner without
    breaking what the client asked for (`where`: a transaction pinned to the old owner, a command
    that blocks or holds state on a connection that streams). Retryable: nothing ran."""
    name = args[0].decode("utf-8", "replace").upper() if args else "COMMAND"
    return resp_error(f"TRYAGAIN {name}: its key's slot is moving between the masters of the Redis Cluster "
                      f"behind Redis Guard; nothing ran. {where}")


SLOT_MOVING_QUEUED = "The transaction is discarded (EXEC answers EXECABORT): retry it"
SLOT_MOVING_WATCH = "Nothing is watched any more (as after UNWATCH): retry the transaction"
SLOT_MOVING_EXEC = "The transaction was discarded: retry it"
SLOT_MOVING_STREAM = "Retry it (or send it on a connection that does not stream)"
SLOT_MOVING_RETRY = "Retry it"


def fanout_in_multi(args) -> bytes:
    """In front of a cluster, inside MULTI on a connection that streams (CLIENT TRACKING, CLIENT REPLY):
    a keyless command meant for every master (FLUSHALL, DBSIZE, SCRIPT LOAD...). The transaction runs
    on the stream's master only, so it could not reach the others."""
    name = b" ".join(args[:2] if len(args) > 1 and args[0].lower() in (b"script", b"function", b"config",
                                                                       b"slowlog", b"latency", b"memory")
                     else args[:1])
    return resp_error(f"ERR {name.decode('utf-8', 'replace').upper()[:64]} inside MULTI on a connection that streams "
                      "(CLIENT TRACKING, CLIENT REPLY) is not supported through redis-guard in front of a Redis "
                      "Cluster (the transaction runs on one master, the command concerns every master): send it "
                      "outside the transaction")
