"""What the nodes say about themselves, presented as the proxy's one server (proxy/backends/cluster/presented.py),
sans I/O: INFO's text, ROLE, CONFIG GET, HELLO's id; the announced address of `face: cluster`
(`cluster_face`, face.announced) and its setting."""

import pytest

from proxy.backends.cluster import face, presented
from proxy.config import (
    Address,
    ClusterFace,
    Config,
    ConfigError,
    Upstream,
    check_face,
    known_settings,
    load_config,
    parse_cluster_face,
)

WHERE = presented.Where(b"127.0.0.1", 6380, None)
NODE_INFO = (
    b"# Server\r\nredis_version:8.2.3\r\nredis_mode:cluster\r\nprocess_id:15307\r\n"
    b"run_id:74f3bccd7ed4114a05ceee3a2202a3dc8b6e4739\r\ntcp_port:17001\r\n"
    b"executable:/usr/bin/redis-server\r\nconfig_file:/etc/redis/17001.conf\r\nio_threads_active:0\r\n"
    b"listener0:name=tcp,bind=10.0.0.7,port=17001\r\nlistener1:name=unix,bind=/run/redis-17001.sock\r\n\r\n"
    b"# Replication\r\nrole:master\r\nconnected_slaves:2\r\n"
    b"slave0:ip=10.0.0.8,port=17004,state=online,offset=70,lag=1\r\n"
    b"slave1:ip=10.0.0.9,port=17005,state=online,offset=70,lag=0\r\n"
    b"master_failover_state:no-failover\r\nmaster_repl_offset:70\r\nslave_expires_tracked_keys:0\r\n\r\n"
    b"# Cluster\r\ncluster_enabled:0\r\n"
)


def test_info_names_the_proxy_and_no_replica():
    text = presented.info_text(NODE_INFO, WHERE)
    for node in (b"17001", b"17004", b"17005", b"10.0.0.", b"redis-17001.sock"):
        assert node not in text
    lines = text.split(b"\r\n")
    assert b"tcp_port:6380" in lines and b"redis_mode:standalone" in lines and b"config_file:" in lines
    assert [line for line in lines if line.startswith(b"listener")] == [b"listener0:name=tcp,bind=127.0.0.1,port=6380"]
    assert b"role:master" in lines and b"connected_slaves:0" in lines and b"master_repl_offset:70" in lines
    # What names no address is the node's (one line starting with 'slave' that is no replica stays)
    assert b"run_id:74f3bccd7ed4114a05ceee3a2202a3dc8b6e4739" in lines and b"slave_expires_tracked_keys:0" in lines
    assert b"executable:/usr/bin/redis-server" in lines and b"process_id:15307" in lines
    both = presented.info_text(NODE_INFO, presented.Where(b"10.1.1.1", 6380, 6381, cluster=True))
    assert b"redis_mode:cluster\r\n" in both
    assert b"listener0:name=tcp,bind=10.1.1.1,port=6380\r\nlistener1:name=tls,bind=10.1.1.1,port=6381\r\n" in both


def test_info_of_a_node_caught_as_a_replica_presents_a_master():
    replica = (b"# Replication\r\nrole:slave\r\nmaster_host:10.0.0.7\r\nmaster_port:17001\r\nmaster_link_status:up\r\n"
               b"master_last_io_seconds_ago:1\r\nmaster_sync_in_progress:0\r\nslave_read_repl_offset:70\r\n"
               b"slave_repl_offset:70\r\nslave_priority:100\r\nslave_read_only:1\r\nreplica_announced:1\r\n"
               b"connected_slaves:0\r\nmaster_repl_offset:70\r\n")
    assert presented.info_text(replica, WHERE) == (b"# Replication\r\nrole:master\r\nconnected_slaves:0\r\n"
                                                    b"master_repl_offset:70\r\n")


@pytest.mark.parametrize("protocol", [2, 3])
def test_info_reply_re_encoded(protocol):
    body = b"# Server\r\ntcp_port:17001\r\n"
    reply = b"$%d\r\n%s\r\n" % (len(body), body) if protocol == 2 else b"=%d\r\ntxt:%s\r\n" % (len(body) + 4, body)
    want = b"# Server\r\ntcp_port:6380\r\n"
    assert presented.info(reply, WHERE) == (b"$%d\r\n%s\r\n" % (len(want), want) if protocol == 2
                                            else b"=%d\r\ntxt:%s\r\n" % (len(want) + 4, want))
    assert presented.info(b"-ERR x\r\n", WHERE) == b"-ERR x\r\n"


def test_role_a_master_without_replicas():
    node = b"*3\r\n$6\r\nmaster\r\n:70\r\n*1\r\n*3\r\n$8\r\n10.0.0.8\r\n$5\r\n17004\r\n$2\r\n70\r\n"
    assert presented.role(node) == b"*3\r\n$6\r\nmaster\r\n:70\r\n*0\r\n"
    replica = b"*5\r\n$5\r\nslave\r\n$8\r\n10.0.0.7\r\n:17001\r\n$9\r\nconnected\r\n:70\r\n"
    assert presented.role(replica) == b"*3\r\n$6\r\nmaster\r\n:0\r\n*0\r\n"
    assert presented.role(b"-LOADING x\r\n") == b"-LOADING x\r\n"
    merge = presented.presenting(b"role", b"role", lambda replies: replies[0], None)
    assert merge([node, node]) == b"*3\r\n$6\r\nmaster\r\n:70\r\n*0\r\n"


def _config(pairs, protocol):
    head = b"%%%d\r\n" % len(pairs) if protocol == 3 else b"*%d\r\n" % (2 * len(pairs))
    return head + b"".join(b"$%d\r\n%s\r\n" % (len(x), x) for pair in pairs for x in pair)


@pytest.mark.parametrize("protocol", [2, 3])
def test_config_get_the_proxy_s_own(protocol):
    node = [(b"port", b"17001"), (b"bind", b"10.0.0.7 -::1"), (b"maxmemory", b"0"), (b"cluster-enabled", b"yes"),
            (b"cluster-config-file", b"nodes-17001.conf"), (b"cluster-announce-ip", b"203.0.113.7"),
            (b"cluster-announce-port", b"17001"), (b"tls-port", b"0"), (b"replica-announce-ip", b"10.0.0.7"),
            (b"cluster-port", b"27001"), (b"unixsocket", b"/run/redis-17001.sock")]
    standalone = presented.config_get(_config(node, protocol), WHERE)
    assert standalone == _config([(b"port", b"6380"), (b"bind", b"127.0.0.1"), (b"maxmemory", b"0"),
                                  (b"cluster-enabled", b"no"), (b"cluster-config-file", b"nodes.conf"),
                                  (b"cluster-announce-ip", b""), (b"cluster-announce-port", b"0"),
                                  (b"tls-port", b"0"), (b"replica-announce-ip", b""), (b"cluster-port", b"0"),
                                  (b"unixsocket", b"")], protocol)
    announced = presented.Where(b"127.0.0.1", 6380, None, True, b"203.0.113.9", 7000, None)
    cluster = presented.config_get(_config(node, protocol), announced)
    assert b"$15\r\ncluster-enabled\r\n$3\r\nyes\r\n" in cluster
    assert b"$19\r\ncluster-announce-ip\r\n$11\r\n203.0.113.9\r\n$21\r\ncluster-announce-port\r\n$4\r\n7000\r\n" in cluster
    assert presented.config_get(b"-ERR x\r\n", WHERE) == b"-ERR x\r\n"
    assert presented.config_get(_config([], protocol), WHERE) == _config([], protocol)


def test_hello_says_the_client_s_id():
    node = (b"*14\r\n$6\r\nserver\r\n$5\r\nredis\r\n$7\r\nversion\r\n$6\r\n7.0.15\r\n$5\r\nproto\r\n:2\r\n"
            b"$2\r\nid\r\n:9\r\n$4\r\nmode\r\n$10\r\nstandalone\r\n$4\r\nrole\r\n$6\r\nmaster\r\n$7\r\nmodules\r\n*0\r\n")
    assert presented.hello(node, 12345) == node.replace(b":9\r\n", b":12345\r\n")
    assert presented.hello(b"-NOPROTO x\r\n", 1) == b"-NOPROTO x\r\n"


# -- the announced address ------------------------------------------------------------------------

def _announce(text, tls_port=None):
    return ClusterFace(Address(*text) if isinstance(text, tuple) else None, tls_port)


def test_announced_address_and_id():
    plain = face.me(("127.0.0.1", 6380), False, 6380, None)
    shown = face.announced(plain, _announce(("203.0.113.9", 7000)), False)
    assert shown == face.Me(b"203.0.113.9", 7000, face.node_id(b"203.0.113.9", 7000), 7000, None)
    # A port 0: the proxy's own
    assert face.announced(plain, _announce(("nat.example", 0)), False).port == 6380
    both = face.me(("127.0.0.1", 6381), True, 6380, 6381)
    shown = face.announced(both, _announce(("203.0.113.9", 7000), 7001), True)
    assert (shown.port, shown.plain_port, shown.tls_port) == (7001, 7000, 7001)
    # Without announce_tls_port a TLS client of both listeners keeps the proxy's own TLS port
    shown = face.announced(both, _announce(("203.0.113.9", 7000)), True)
    assert (shown.host, shown.port, shown.plain_port, shown.tls_port) == (b"203.0.113.9", 6381, 7000, 6381)
    # TLS alone: the announce's port is the TLS one
    tls_only = face.me(("127.0.0.1", 6381), True, None, 6381)
    shown = face.announced(tls_only, _announce(("203.0.113.9", 7000)), True)
    assert (shown.port, shown.plain_port, shown.tls_port) == (7000, None, 7000)
    assert face.slots_reply(shown, 2).count(b"203.0.113.9") == 1


def test_the_cluster_face_setting(tmp_path):
    assert Config().cluster_face == ClusterFace()
    assert parse_cluster_face({"announce": "203.0.113.9:7000"}, "f") == ClusterFace(Address("203.0.113.9", 7000))
    assert parse_cluster_face({"announce": "nat.example"}, "f") == ClusterFace(Address("nat.example", 0))
    assert parse_cluster_face({"announce": "[2001:db8::1]:7000", "announce_tls_port": 7001}, "f") == ClusterFace(
        Address("2001:db8::1", 7000), 7001)
    for bad, message in (({"announce": ""}, "'announce' must be host or host:port"),
                         ({"announce": 7000}, "'announce' needs a host"),
                         ({"announce": ["a"]}, "'announce' must be host or host:port"),
                         ({"announce": "h:99999"}, "port out of range"),
                         ({"announce": "h:7000", "announce_tls_port": "x"}, "'announce_tls_port' must be a port"),
                         ({"announce": "h:7000", "announce_tls_port": 0}, "'announce_tls_port' must be a port"),
                         ({"announce_tls_port": 7001}, "'announce_tls_port' goes with 'announce'")):
        with pytest.raises(ConfigError, match=message):
            parse_cluster_face(bad, "f")
    assert {"announce", "announce_tls_port"} <= known_settings()[("cluster_face",)]
    path = tmp_path / "c.yaml"
    path.write_text("upstream_cluster: 127.0.0.1:7000\nface: cluster\ncluster_face:\n  announce: 203.0.113.9:7000\n")
    config = load_config(str(path))
    assert config.cluster_face == ClusterFace(Address("203.0.113.9", 7000))
    check_face(config)
    with pytest.raises(ConfigError, match="cluster_face: the address announced by face: cluster"):
        check_face(config.replace(face="standalone"))
    path.write_text("cluster_face:\n  anounce: x\n")
    with pytest.raises(ConfigError, match=r"unknown setting 'anounce' \(did you mean announce\?\)"):
        load_config(str(path))
    check_face(Config(upstream=Upstream(Address("127.0.0.1", 7000))))


@pytest.mark.parametrize("protocol", [2, 3])
def test_acl_log_entries_say_the_proxy_s_laddr(protocol):
    info = b"id=6 addr=127.0.0.1:59322 laddr=10.0.0.7:17001 fd=10 name= age=0 cmd=auth user=default resp=3"
    fields = [(b"count", b":1\r\n"), (b"reason", b"$4\r\nauth\r\n"), (b"age-seconds", b",6.7\r\n" if protocol == 3
                                                                     else b"$5\r\n6.764\r\n"),
              (b"username", b"$9\r\nx laddr=y\r\n"), (b"client-info", b"$%d\r\n%s\r\n" % (len(info), info))]
    head = b"%%%d\r\n" % len(fields) if protocol == 3 else b"*%d\r\n" % (2 * len(fields))
    entry = head + b"".join(b"$%d\r\n%s\r\n" % (len(name), name) + value for name, value in fields)
    reply = b"*2\r\n" + entry + entry
    shown = presented.acl_log(reply, WHERE)
    want = info.replace(b"10.0.0.7:17001", b"127.0.0.1:6380")
    assert shown == reply.replace(b"$%d\r\n%s\r\n" % (len(info), info), b"$%d\r\n%s\r\n" % (len(want), want))
    assert b"17001" not in shown and b"x laddr=y" in shown
    assert presented.acl_log(b"*0\r\n", WHERE) == b"*0\r\n" and presented.acl_log(b"+OK\r\n", WHERE) == b"+OK\r\n"
