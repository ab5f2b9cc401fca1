"""The proxy's face as a one-node Redis Cluster (`face: cluster`), sans I/O: the replies of the
CLUSTER subcommands a cluster client discovers a cluster with, byte for byte as Redis 7 writes
them for a node that owns all 16,384 slots and has no replica.

A cluster client pointed at the proxy asks CLUSTER SLOTS (or SHARDS, or NODES) and then connects
to the nodes it names: the one node named here is the proxy itself, at the address the client
reached it by (its connection's local address: the interface it came in on when the proxy
listens on 0.0.0.0, the same port for every worker sharing it, the TLS port for a TLS client),
so the client's later connections come back to the proxy and never learn the real nodes. The
node's id is derived from that address (the same in every worker and after a restart). What a
client asks about the keyspace (COUNTKEYSINSLOT, GETKEYSINSLOT) goes to the real owner of the
slot (`decide` says where), KEYSLOT is computed here; the commands that reshape a cluster are
refused: the proxy does not let a client rearrange the nodes it hides.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from ... import errors
from .routing.slots import hash_slot

SLOTS = 16384

# The subcommands that change the cluster's shape or a node's configuration: refused.
RESHAPING = frozenset({
    b"addslots", b"addslotsrange", b"delslots", b"delslotsrange", b"flushslots", b"setslot", b"meet",
    b"forget", b"replicate", b"failover", b"reset", b"saveconfig", b"bumpepoch", b"set-config-epoch",
})


@dataclass(frozen=True, slots=True)
class Me:
    """The one node a client sees: where it reached the proxy, and the node's id.
    `port` is the port of the client's own connection (plain or TLS); `plain_port`/`tls_port`
    the proxy's listeners of each kind (None: none), which CLUSTER SHARDS lists."""

    host: bytes
    port: int
    node_id: bytes
    plain_port: int | None = None
    tls_port: int | None = None


def node_id(host: bytes, port: int) -> bytes:
    """40 hex digits, the same for one address in every worker and after a restart."""
    return hashlib.sha1(b"redis-guard face %s:%d" % (host, port)).hexdigest().encode()


def host_of(sockname) -> bytes:
    """The host part of a socket's local address; an IPv4 address mapped into IPv6 (a dual-stack
    listener) as the IPv4 address a client uses."""
    host = sockname[0] if isinstance(sockname, tuple) else ""
    if host.startswith("::ffff:") and "." in host:
        host = host[7:]
    return host.encode()


def me(sockname, tls: bool, plain_port: int | None, tls_port: int | None) -> Me:
    """The node a client reached by `sockname` (over TLS or not) sees."""
    host = host_of(sockname)
    port = sockname[1] if isinstance(sockname, tuple) else (tls_port if tls else plain_port) or 0
    return Me(host, port, node_id(host, port), plain_port, tls_port)


def announced(node: Me, announce, tls: bool) -> Me:
    """The node as `cluster_face` announces it (`config.ClusterFace`): its host, its port for the
    plain listener (0: the proxy's own), `announce_tls_port` for the TLS one (without it: the
    announce's port when the proxy listens with TLS only, else the proxy's own TLS port)."""
    address = announce.announce
    host = address.host.encode()
    plain = None if node.plain_port is None else address.port or node.plain_port
    tls_port = node.tls_port
    if tls_port is not None:
        tls_port = announce.announce_tls_port or (address.port if node.plain_port is None else 0) or tls_port
    port = (tls_port if tls else plain) or node.port
    return Me(host, port, node_id(host, port), plain, tls_port)


# -- RESP pieces --------------------------------------------------------------------------------

def _bulk(value: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(value), value)


def _text(body: bytes, protocol: int) -> bytes:
    """A text reply: a bulk string in RESP2, a verbatim string (txt) in RESP3, as Redis writes
    CLUSTER NODES and CLUSTER INFO."""
    if protocol == 3:
        return b"=%d\r\ntxt:%s\r\n" % (len(body) + 4, body)
    return _bulk(body)


def _map(pairs: list[tuple[bytes, bytes]], protocol: int) -> bytes:
    """A map of bulk-string names to encoded values (a flat array in RESP2)."""
    head = b"%%%d\r\n" % len(pairs) if protocol == 3 else b"*%d\r\n" % (2 * len(pairs))
    return head + b"".join(_bulk(name) + value for name, value in pairs)


# -- the replies --------------------------------------------------------------------------------

def slots_reply(node: Me, protocol: int) -> bytes:
    """CLUSTER SLOTS: one range, 0-16383, served by this node (no replica)."""
    metadata = b"%0\r\n" if protocol == 3 else b"*0\r\n"
    return (b"*1\r\n*3\r\n:0\r\n:%d\r\n*4\r\n" % (SLOTS - 1) + _bulk(node.host) + b":%d\r\n" % node.port
            + _bulk(node.node_id) + metadata)


def shards_reply(node: Me, protocol: int) -> bytes:
    """CLUSTER SHARDS: one shard, slots 0-16383, this node its master."""
    fields = [(b"id", _bulk(node.node_id))]
    if node.plain_port is not None:
        fields.append((b"port", b":%d\r\n" % node.plain_port))
    if node.tls_port is not None:
        fields.append((b"tls-port", b":%d\r\n" % node.tls_port))
    fields += [(b"ip", _bulk(node.host)), (b"endpoint", _bulk(node.host)), (b"role", _bulk(b"master")),
               (b"replication-offset", b":0\r\n"), (b"health", _bulk(b"online"))]
    shard = _map([(b"slots", b"*2\r\n:0\r\n:%d\r\n" % (SLOTS - 1)), (b"nodes", b"*1\r\n" + _map(fields, protocol))],
                 protocol)
    return b"*1\r\n" + shard


def nodes_line(node: Me) -> bytes:
    """This node's line of CLUSTER NODES (no cluster bus: its port shows as 0)."""
    return b"%s %s:%d@0 myself,master - 0 0 0 connected 0-%d\n" % (node.node_id, node.host, node.port, SLOTS - 1)


def nodes_reply(node: Me, protocol: int) -> bytes:
    return _text(nodes_line(node), protocol)


INFO_TEXT = (
    b"cluster_state:ok\r\n"
    b"cluster_slots_assigned:16384\r\n"
    b"cluster_slots_ok:16384\r\n"
    b"cluster_slots_pfail:0\r\n"
    b"cluster_slots_fail:0\r\n"
    b"cluster_known_nodes:1\r\n"
    b"cluster_size:1\r\n"
    b"cluster_current_epoch:0\r\n"
    b"cluster_my_epoch:0\r\n"
    b"cluster_stats_messages_sent:0\r\n"
    b"cluster_stats_messages_received:0\r\n"
    b"total_cluster_links_buffer_limit_exceeded:0\r\n"
)


def info_reply(protocol: int) -> bytes:
    """CLUSTER INFO: a healthy one-node cluster (the real cluster's troubles show as errors on
    the commands they concern, and on the proxy's /ready)."""
    return _text(INFO_TEXT, protocol)


# -- what to do with a CLUSTER subcommand --------------------------------------------------------

@dataclass(frozen=True, slots=True)
class ToSlot:
    """Forward the command to the master that owns `slot` (its reply is the client's)."""

    slot: int


def decide(args: list[bytes], node: Me, protocol: int) -> bytes | ToSlot:
    """The reply to CLUSTER `args` (arity already checked), or where it goes."""
    sub = args[1].lower()
    if sub == b"slots":
        return slots_reply(node, protocol)
    if sub == b"shards":
        return shards_reply(node, protocol)
    if sub == b"nodes":
        return nodes_reply(node, protocol)
    if sub == b"info":
        return info_reply(protocol)
    if sub == b"myid":
        return _bulk(node.node_id)
    if sub == b"keyslot":
        return b":%d\r\n" % hash_slot(args[2])
    if sub in (b"countkeysinslot", b"getkeysinslot"):
        # The real owner of the slot counts its keys; a slot that is no slot goes anywhere, and
        # Redis answers its error.
        slot = args[2]
        if slot.isdigit() and len(slot) < 6 and int(slot) < SLOTS:
            return ToSlot(int(slot))
        return ToSlot(0)
    if sub in (b"replicas", b"slaves"):
        return b"*0\r\n" if args[2] == node.node_id else errors.unknown_node(args[2])
    if sub == b"count-failure-reports":
        return b":0\r\n" if args[2] == node.node_id else errors.unknown_node(args[2])
    if sub == b"links":
        return b"*0\r\n"
    if sub == b"myshardid":
        return _bulk(hashlib.sha1(b"redis-guard shard " + node.node_id).hexdigest().encode())
    if sub == b"help":
        return ToSlot(0)  # (the real node's text)
    # What reshapes the cluster (RESHAPING), and what this face does not know (a newer server's
    # subcommand, which might describe the real nodes): refused with the reason.
    return errors.cluster_face_refused(args[1], sub in RESHAPING)
