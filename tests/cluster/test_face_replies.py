"""The one-node cluster face (`face: cluster`, proxy/backends/cluster/face.py), sans I/O: each reply byte
for byte in RESP2 and RESP3 (the forms Redis 7.0 writes for a node that owns every slot, checked
against a real one in tests/cluster/test_face.py), what a CLUSTER subcommand becomes, the node's
address and id; INFO's cluster_enabled per face; the setting."""

import hashlib

import pytest

from proxy.backends.cluster import face
from proxy.backends.cluster.keyspace import merge_info, merge_info_cluster
from proxy.config import Address, Config, ConfigError, Upstream, check_face, parse_face

ID = b"0123456789abcdef0123456789abcdef01234567"
ME = face.Me(b"127.0.0.1", 6380, ID, plain_port=6380)


def test_slots_one_range_served_by_the_proxy():
    assert face.slots_reply(ME, 2) == (
        b"*1\r\n*3\r\n:0\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:6380\r\n$40\r\n" + ID + b"\r\n*0\r\n")
    assert face.slots_reply(ME, 3) == (
        b"*1\r\n*3\r\n:0\r\n:16383\r\n*4\r\n$9\r\n127.0.0.1\r\n:6380\r\n$40\r\n" + ID + b"\r\n%0\r\n")


NODE_FIELDS = (b"$2\r\nid\r\n$40\r\n" + ID + b"\r\n$4\r\nport\r\n:6380\r\n$2\r\nip\r\n$9\r\n127.0.0.1\r\n"
               b"$8\r\nendpoint\r\n$9\r\n127.0.0.1\r\n$4\r\nrole\r\n$6\r\nmaster\r\n"
               b"$18\r\nreplication-offset\r\n:0\r\n$6\r\nhealth\r\n$6\r\nonline\r\n")


def test_shards_one_shard_with_the_proxy_its_master():
    assert face.shards_reply(ME, 2) == (
        b"*1\r\n*4\r\n$5\r\nslots\r\n*2\r\n:0\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n*14\r\n" + NODE_FIELDS)
    assert face.shards_reply(ME, 3) == (
        b"*1\r\n%2\r\n$5\r\nslots\r\n*2\r\n:0\r\n:16383\r\n$5\r\nnodes\r\n*1\r\n%7\r\n" + NODE_FIELDS)


def test_shards_lists_the_tls_port_and_the_plain_one():
    both = face.Me(b"10.0.0.5", 6381, ID, plain_port=6380, tls_port=6381)
    reply = face.shards_reply(both, 3)
    assert b"%8\r\n$2\r\nid\r\n$40\r\n" + ID + b"\r\n$4\r\nport\r\n:6380\r\n$8\r\ntls-port\r\n:6381\r\n$2\r\nip\r\n" \
        b"$8\r\n10.0.0.5\r\n" in reply
    only_tls = face.shards_reply(face.Me(b"10.0.0.5", 6381, ID, tls_port=6381), 2)
    assert b"*14\r\n" in only_tls and b"$4\r\nport\r\n" not in only_tls and b"$8\r\ntls-port\r\n:6381\r\n" in only_tls


def test_nodes_one_line_myself_master_every_slot():
    line = ID + b" 127.0.0.1:6380@0 myself,master - 0 0 0 connected 0-16383\n"
    assert face.nodes_reply(ME, 2) == b"$%d\r\n%s\r\n" % (len(line), line)
    assert face.nodes_reply(ME, 3) == b"=%d\r\ntxt:%s\r\n" % (len(line) + 4, line)


def test_info_a_healthy_one_node_cluster():
    assert face.info_reply(2).startswith(b"$312\r\ncluster_state:ok\r\ncluster_slots_assigned:16384\r\n")
    assert face.info_reply(3).startswith(b"=316\r\ntxt:cluster_state:ok\r\n")
    text = face.info_reply(2).split(b"\r\n", 1)[1][:-2]
    fields = dict(line.split(b":") for line in text.split(b"\r\n") if line)
    assert fields[b"cluster_known_nodes"] == b"1" and fields[b"cluster_size"] == b"1"
    assert fields[b"cluster_slots_ok"] == b"16384" and fields[b"cluster_slots_fail"] == b"0"


def test_node_id_from_the_address_alone():
    first = face.node_id(b"127.0.0.1", 6380)
    assert first == face.node_id(b"127.0.0.1", 6380)  # every worker, every restart
    assert len(first) == 40 and all(c in b"0123456789abcdef" for c in first)
    assert first != face.node_id(b"127.0.0.1", 6381) and first != face.node_id(b"127.0.0.2", 6380)


@pytest.mark.parametrize(("sockname", "host"), [
    (("127.0.0.1", 6380), b"127.0.0.1"),
    (("10.1.2.3", 6380), b"10.1.2.3"),
    (("::1", 6380, 0, 0), b"::1"),
    (("::ffff:127.0.0.1", 6380, 0, 0), b"127.0.0.1"),  # a dual-stack listener
    ("/tmp/socket", b""),
    (None, b""),
])
def test_host_of_the_clients_connection(sockname, host):
    assert face.host_of(sockname) == host


def test_me_is_where_the_client_came_in():
    node = face.me(("10.0.0.7", 7000), False, 7000, None)
    assert node == face.Me(b"10.0.0.7", 7000, face.node_id(b"10.0.0.7", 7000), 7000, None)
    tls = face.me(("10.0.0.7", 7001), True, 7000, 7001)
    assert (tls.port, tls.plain_port, tls.tls_port) == (7001, 7000, 7001)


def test_decide_keyslot_here():
    assert face.decide([b"CLUSTER", b"KEYSLOT", b"foo"], ME, 2) == b":12182\r\n"
    assert face.decide([b"cluster", b"keyslot", b"{user1000}.following"], ME, 2) == \
        face.decide([b"cluster", b"keyslot", b"user1000"], ME, 3)


@pytest.mark.parametrize(("slot", "where"), [(b"0", 0), (b"5461", 5461), (b"16383", 16383),
                                               (b"16384", 0), (b"-1", 0), (b"x", 0), (b"99999999", 0)])
def test_decide_keys_in_a_slot_by_its_owner(slot, where):
    """A slot that is no slot goes anywhere: Redis answers its error."""
    assert face.decide([b"CLUSTER", b"COUNTKEYSINSLOT", slot], ME, 2) == face.ToSlot(where)
    assert face.decide([b"CLUSTER", b"GETKEYSINSLOT", slot, b"10"], ME, 2) == face.ToSlot(where)


def test_decide_the_nodes_own_questions():
    assert face.decide([b"CLUSTER", b"MYID"], ME, 3) == b"$40\r\n" + ID + b"\r\n"
    assert face.decide([b"CLUSTER", b"REPLICAS", ID], ME, 2) == b"*0\r\n"
    assert face.decide([b"CLUSTER", b"SLAVES", ID], ME, 2) == b"*0\r\n"
    assert face.decide([b"CLUSTER", b"REPLICAS", b"x"], ME, 2) == b"-ERR Unknown node x\r\n"
    assert face.decide([b"CLUSTER", b"COUNT-FAILURE-REPORTS", ID], ME, 2) == b":0\r\n"
    assert face.decide([b"CLUSTER", b"COUNT-FAILURE-REPORTS", b"y"], ME, 2) == b"-ERR Unknown node y\r\n"
    assert face.decide([b"CLUSTER", b"LINKS"], ME, 3) == b"*0\r\n"
    assert face.decide([b"CLUSTER", b"HELP"], ME, 2) == face.ToSlot(0)
    shard = face.decide([b"CLUSTER", b"MYSHARDID"], ME, 2)
    assert shard == b"$40\r\n" + hashlib.sha1(b"redis-guard shard " + ID).hexdigest().encode() + b"\r\n"
    for sub in (b"SLOTS", b"shards", b"Nodes", b"INFO"):
        assert face.decide([b"CLUSTER", sub], ME, 2)[:1] in (b"*", b"$")


@pytest.mark.parametrize("sub", sorted(face.RESHAPING))
def test_decide_reshaping_refused(sub):
    reply = face.decide([b"CLUSTER", sub, b"a", b"b"], ME, 2)
    assert reply == (f"-ERR CLUSTER {sub.decode().upper()} is not available through redis-guard: it presents "
                     "the cluster as one node (face: cluster); change the cluster on its nodes directly\r\n").encode()


def test_decide_an_unknown_subcommand_refused_not_forwarded():
    """A newer server's subcommand might describe the real nodes: refused, not passed on."""
    assert face.decide([b"CLUSTER", b"SLOT-STATS", b"ORDERBY", b"key-count"], ME, 2) == (
        b"-ERR CLUSTER SLOT-STATS is not available through redis-guard's one-node cluster face (face: cluster)\r\n")


INFO_2 = b"# Server\r\nredis_version:7.0.15\r\n\r\n# Cluster\r\ncluster_enabled:1\r\n\r\n# Keyspace\r\n" \
         b"db0:keys=2,expires=0,avg_ttl=0\r\n"


def _bulk(text: bytes) -> bytes:
    return b"$%d\r\n%s\r\n" % (len(text), text)


def test_info_says_cluster_enabled_per_face():
    replies = [_bulk(INFO_2), _bulk(INFO_2.replace(b"keys=2", b"keys=3"))]
    standalone, cluster = merge_info(replies), merge_info_cluster(replies)
    assert b"cluster_enabled:0\r\n" in standalone and b"cluster_enabled:1" not in standalone
    assert b"cluster_enabled:1\r\n" in cluster and b"db0:keys=5," in cluster
    assert cluster == standalone.replace(b"cluster_enabled:0", b"cluster_enabled:1")


def test_the_face_setting():
    assert Config().face == "standalone"
    assert parse_face("cluster") == "cluster" and parse_face(" Standalone ") == "standalone"
    for bad in ("clustered", "", None, 1, True):
        with pytest.raises(ConfigError, match="'face' must be standalone or cluster"):
            parse_face(bad)
    seed = Upstream(Address("127.0.0.1", 7000))
    check_face(Config(face="cluster", upstream_cluster=(seed,)))
    check_face(Config(face="standalone", upstream=seed))
    with pytest.raises(ConfigError, match=r"face: cluster presents a Redis Cluster \(upstream_cluster\) as one node"):
        check_face(Config(face="cluster", upstream=seed))
