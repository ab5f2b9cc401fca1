"""What the nodes of a cluster say about themselves, said as the one server the proxy presents,
sans I/O: INFO, ROLE, CONFIG GET, ACL LOG and HELLO in front of a cluster, with no node's address
or port.

A client of the proxy must never learn where the real nodes are (it would go around the guard),
and what it is told must agree with the face it sees: one standalone server (the default face), or
a one-node cluster at the proxy's address (`face: cluster`, `face.py`). These replies come from
the masters (INFO and CONFIG GET from every master, the first one's text standing for all:
`keyspace.merge_info`, `merge_first`; ROLE and ACL LOG likewise) and are rewritten field by field:
where a node names itself (`tcp_port`, `listenerN`, CONFIG `port`/`bind`..., ACL LOG's `laddr`)
the proxy's own listening address is said instead, the address the client reached it by (`Where`);
a master's replicas are not shown (`connected_slaves:0`, ROLE's empty list): a standalone server
without replicas, or the one-node cluster without replicas `CLUSTER SHARDS` describes. What names
no address (run_id, offsets, memory, stats) is the first master's. HELLO says the client's id.
"""

from __future__ import annotations

from dataclasses import dataclass

from .face import _bulk
from .keyspace import _bulk_text

__all__ = ["Where", "info", "role", "hello", "config_get", "presents", "presenting"]


@dataclass(frozen=True, slots=True)
class Where:
    """The proxy as the client sees it: `host` the address it reached the proxy by, the proxy's
    listening ports (None: no such listener), the face, and (`face: cluster`) the announced
    address (`cluster_face.announce`: host, plain port, TLS port; None: not set)."""

    host: bytes
    plain_port: int | None
    tls_port: int | None
    cluster: bool = False
    announce_host: bytes | None = None
    announce_port: int | None = None
    announce_tls_port: int | None = None


# -- INFO -----------------------------------------------------------------------------------------

# Lines of INFO replication that only a replica writes (a node caught mid-failover): the one server
# presented is a master.
REPLICA_ONLY = (b"master_host:", b"master_port:", b"master_link_status:", b"master_last_io_seconds_ago:",
                b"master_sync_", b"master_link_down_since_seconds:", b"slave_read_repl_offset:",
                b"slave_repl_offset:", b"slave_priority:", b"replica_priority:", b"slave_read_only:",
                b"replica_read_only:", b"replica_announced:", b"min_slaves_good_slaves:")


def _is_replica_line(line: bytes) -> bool:
    """slaveN:ip=...,port=... (one of a master's replicas)."""
    if not line.startswith(b"slave"):
        return False
    name = line.split(b":", 1)[0]
    return name[5:].isdigit()


def _listeners(where: Where) -> list[bytes]:
    """Redis 7.2+'s listenerN lines, for the proxy's listeners."""
    out = []
    if where.plain_port is not None:
        out.append((b"tcp", where.plain_port))
    if where.tls_port is not None:
        out.append((b"tls", where.tls_port))
    return [b"listener%d:name=%s,bind=%s,port=%d" % (at, name, where.host, port)
            for at, (name, port) in enumerate(out)]


def info_text(text: bytes, where: Where) -> bytes:
    """INFO's text with the proxy's address where a node names its own, and no replica."""
    out = []
    listed = False
    for line in text.split(b"\r\n"):
        if line.startswith(b"redis_mode:"):
            line = b"redis_mode:cluster" if where.cluster else b"redis_mode:standalone"
        elif line.startswith(b"tcp_port:"):
            line = b"tcp_port:%d" % (where.plain_port or 0)
        elif line.startswith(b"config_file:"):
            line = b"config_file:"  # (a node's file name often carries its port)
        elif line.startswith(b"listener") and b":name=" in line:
            if not listed:
                out.extend(_listeners(where))
                listed = True
            continue
        elif line.startswith(b"role:"):
            line = b"role:master"
        elif line.startswith(b"connected_slaves:"):
            line = b"connected_slaves:0"
        elif line.startswith(REPLICA_ONLY) or _is_replica_line(line):
            continue
        out.append(line)
    return b"\r\n".join(out)


def info(reply: bytes, where: Where) -> bytes:
    """The merged INFO reply (bulk or verbatim string) rewritten (`info_text`); an error as it is."""
    text = _bulk_text(reply)
    if text is None:
        return reply
    prefix, body = text
    body = prefix + info_text(body, where)
    return (b"=" if prefix else b"$") + b"%d\r\n" % len(body) + body + b"\r\n"


# -- ROLE -----------------------------------------------------------------------------------------

def role(reply: bytes) -> bytes:
    """ROLE as a master without replicas: `master`, the master's replication offset, no replica
    (a node caught mid-failover, a replica, says so too: offset 0)."""
    if reply[:1] != b"*":
        return reply  # an error: the client sees it
    parts = reply.split(b"\r\n", 4)
    if len(parts) > 3 and parts[1:3] == [b"$6", b"master"] and parts[3][:1] == b":":
        return b"*3\r\n$6\r\nmaster\r\n%s\r\n*0\r\n" % parts[3]
    return b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"


# -- HELLO ----------------------------------------------------------------------------------------

HELLO_ID = b"\r\n$2\r\nid\r\n:"


def hello(reply: bytes, client_id: int) -> bytes:
    """HELLO's reply with the client's id (the one CLIENT ID gives), not that of the node's
    connection that answered it."""
    at = reply.find(HELLO_ID)
    if at < 0 or reply[:1] not in (b"*", b"%"):
        return reply
    start = at + len(HELLO_ID)
    end = reply.find(b"\r\n", start)
    return reply[:start] + b"%d" % client_id + reply[end:]


# -- CONFIG GET -----------------------------------------------------------------------------------

def _pairs(reply: bytes) -> tuple[bytes, list[bytes]] | None:
    """(header, the bulk strings) of CONFIG GET's reply (a flat array in RESP2, a map in RESP3);
    None for anything else."""
    if reply[:1] not in (b"*", b"%"):
        return None
    head_end = reply.find(b"\r\n")
    count = int(reply[1:head_end]) * (2 if reply[:1] == b"%" else 1)
    values = []
    at = head_end + 2
    for _ in range(count):
        if reply[at:at + 1] != b"$":
            return None
        nl = reply.find(b"\r\n", at)
        size = int(reply[at + 1:nl])
        values.append(reply[nl + 2:nl + 2 + size])
        at = nl + 4 + size
    return reply[:head_end + 2], values


def config_values(where: Where) -> dict[bytes, bytes]:
    """The values CONFIG GET gives, for the parameters where a node would name itself, its files or
    its replication: those of the one server presented."""
    ports = (b"%d" % (where.plain_port or 0), b"%d" % (where.tls_port or 0))
    announced = where.cluster and where.announce_host is not None
    values = {
        b"port": ports[0],
        b"tls-port": ports[1],
        b"bind": where.host,
        b"bind-source-addr": b"",
        b"unixsocket": b"",
        b"cluster-enabled": b"yes" if where.cluster else b"no",
        b"cluster-config-file": b"nodes.conf",
        b"cluster-port": b"0",
        b"cluster-announce-ip": where.announce_host if announced else b"",
        b"cluster-announce-hostname": b"",
        b"cluster-announce-human-nodename": b"",
        b"cluster-announce-port": b"%d" % (where.announce_port or 0) if announced else b"0",
        b"cluster-announce-tls-port": b"%d" % (where.announce_tls_port or 0) if announced else b"0",
        b"cluster-announce-bus-port": b"0",
        b"replica-announce-ip": b"",
        b"slave-announce-ip": b"",
        b"replica-announce-port": b"0",
        b"slave-announce-port": b"0",
        b"replicaof": b"",
        b"slaveof": b"",
    }
    return values


def config_get(reply: bytes, where: Where) -> bytes:
    """CONFIG GET's merged reply with `config_values` in place of the node's own."""
    parsed = _pairs(reply)
    if parsed is None:
        return reply  # an error: the client sees it
    head, values = parsed
    presented = config_values(where)
    for at in range(0, len(values) - 1, 2):
        value = presented.get(values[at].lower())
        if value is not None:
            values[at + 1] = value
    return head + b"".join(_bulk(value) for value in values)


# -- ACL LOG --------------------------------------------------------------------------------------

AGGREGATES = {b"*": 1, b"~": 1, b">": 1, b"%": 2, b"|": 2}


def _bulks(reply: bytes):
    """(head, start, end) of every bulk string of a reply, in order: where its `$` is, where its
    content starts and ends; a walk of the reply's structure (no content is read as RESP)."""
    at = 0
    owed = 1
    while owed and at < len(reply):
        owed -= 1
        kind = reply[at:at + 1]
        nl = reply.find(b"\r\n", at)
        if nl < 0:
            return
        if kind in AGGREGATES:
            count = int(reply[at + 1:nl])
            owed += max(count, 0) * AGGREGATES[kind]
            if kind == b"|":
                owed += 1  # (attributes precede the reply they describe)
            at = nl + 2
        elif kind in (b"$", b"=", b"!"):
            size = int(reply[at + 1:nl])
            if size >= 0:
                yield at, nl + 2, nl + 2 + size
                at = nl + 4 + size
            else:
                at = nl + 2
        else:
            at = nl + 2


def _laddr(info: bytes, where: Where) -> bytes:
    """A client's line (`id=... laddr=host:port ...`) with the proxy's address as laddr."""
    start = info.find(b" laddr=")
    if start < 0:
        return info
    start += 7
    end = info.find(b" ", start)
    end = len(info) if end < 0 else end
    return info[:start] + b"%s:%d" % (where.host, where.plain_port or where.tls_port or 0) + info[end:]


def acl_log(reply: bytes, where: Where) -> bytes:
    """ACL LOG's entries: their `client-info` lines say the proxy's address as laddr (a node's
    said its own: the connection that was denied was to that node)."""
    if reply[:1] not in (b"*", b"%"):
        return reply
    out = []
    done = 0
    for head, start, end in list(_bulks(reply)):
        content = reply[start:end]
        if reply[head:head + 1] == b"$" and content.startswith(b"id=") and b" laddr=" in content:
            content = _laddr(content, where)
            out.append(reply[done:head] + b"$%d\r\n" % len(content) + content)
            done = end
    out.append(reply[done:])
    return b"".join(out)


# -- which merges present -------------------------------------------------------------------------

def presents(name: bytes, full: bytes) -> bool:
    """Whether a command sent to every master is one `presenting` rewrites."""
    return name in (b"info", b"role") or full in (b"config|get", b"acl|log")


def presenting(name: bytes, full: bytes, merge, where_of):
    """The merge of a command sent to every master (`handlers.fanout`: `name` 'info', `full`
    'config|get'...), presenting its reply; `where_of()` gives the `Where`, when one is needed."""
    if name == b"info":
        where = where_of()
        return lambda replies: info(merge(replies), where)
    if full == b"config|get":
        where = where_of()
        return lambda replies: config_get(merge(replies), where)
    if name == b"role":
        return lambda replies: role(merge(replies))
    if full == b"acl|log":
        where = where_of()
        return lambda replies: acl_log(merge(replies), where)
    return merge
