"""CLIENT TRACKING reaches the client itself only (issue 49): a REDIRECT names a connection of the
same client (the same application; without applications, the same client host) whose CLIENT ID
the proxy answered, never another's nor one of the proxy's shared connections; BCAST under
applications needs PREFIXes inside the application's prefixes. And the smaller leaks: COPY ... DB
and the PUBSUB listings. Each effect is checked on the upstream directly (CLIENT LIST's flags)
or by what the other clients receive."""

import time

import hiredis
import pytest
import redis

from proxy.policy.passwords import hash_password
from tests.integration.test_tracking import Resp3Client
from tests.servers import ProxyProcess, RedisServer, exchange

UPSTREAM_PASSWORD = "upstream-only"
PASSWORDS = {"alpha": "alpha-pw", "beta": "beta-pw"}
POLICY = """
name: trk
auth: required
applications:
  alpha:
    password_hash: "{alpha}"
    prefixes: ["a:"]
  beta:
    password_hash: "{beta}"
    prefixes: ["b:"]
rules:
  K7: {{}}
"""
REFUSED_REDIRECT = "The client ID you want redirect to does not exist"  # Redis's words, whoever has it


@pytest.fixture(scope="module")
def apps(tmp_path_factory):
    directory = tmp_path_factory.mktemp("tracking_apps")
    server = RedisServer(None, "--requirepass", UPSTREAM_PASSWORD)
    hashes = {name: hash_password(password.encode(), log_n=10) for name, password in PASSWORDS.items()}
    (directory / "policy.yaml").write_text(POLICY.format(**hashes))
    (directory / "config.yaml").write_text("policy: policy.yaml\n")
    process = ProxyProcess(f"redis://:{UPSTREAM_PASSWORD}@127.0.0.1:{server.port}", str(directory / "config.yaml"))
    yield server, process
    process.stop()
    server.close()


@pytest.fixture
def admin(apps):
    client = redis.Redis(port=apps[0].port, password=UPSTREAM_PASSWORD)
    yield client
    client.close()


@pytest.fixture
def clients():
    opened = []
    yield opened
    for client in opened:
        client.close()


def connect(port: int, clients: list, app: str | None = None, protocol: int = 2) -> Resp3Client:
    """A raw connection, authenticated as `app` (if any) in `protocol`."""
    client = Resp3Client(port)
    clients.append(client)
    if protocol == 3:
        client.send(["HELLO", "3", *(("AUTH", app, PASSWORDS[app]) if app else ())])
        assert isinstance(client.replies(1)[0], dict)
    elif app:
        client.send(["AUTH", app, PASSWORDS[app]])
        assert client.replies(1) == [b"OK"]
    return client


def ask(client: Resp3Client, *command):
    client.send(list(command))
    return client.replies(1)[0]


def client_id(client: Resp3Client) -> int:
    value = ask(client, "CLIENT", "ID")
    assert isinstance(value, int)
    return value


def pushes(client: Resp3Client, seconds: float = 0.3) -> list:
    client.drain(seconds)
    out = [value for push, value in client.values if push or (isinstance(value, list) and value[:1] == [b"message"])]
    client.values.clear()
    return out


def tracking_flags(admin) -> list:
    """The flags of every client of the server that tracks (t), or whose redirect broke (R)."""
    return [row["flags"] for row in admin.client_list() if "t" in row["flags"] or "R" in row["flags"]]


def error(value) -> str:
    assert isinstance(value, hiredis.ReplyError), value
    return str(value)


# -- REDIRECT ---------------------------------------------------------------------------------

@pytest.mark.parametrize("target_protocol", [2, 3])
@pytest.mark.parametrize("tracker_protocol", [2, 3])
def test_redirect_to_another_application_is_refused(apps, admin, clients, tracker_protocol, target_protocol):
    """beta's connection (a RESP2 subscriber of its own channel, or RESP3), its id known: alpha's
    REDIRECT to it is refused, so are the server's other ids (the proxy's shared connections,
    enumerated by CLIENT LIST); beta receives nothing when alpha's keys change."""
    server, process = apps
    target = connect(process.port, clients, "beta", target_protocol)
    target_id = client_id(target)
    if target_protocol == 2:
        target.send(["SUBSCRIBE", "b:news"])
        assert target.replies(1) == [[b"subscribe", b"b:news", 1]]
    tracker = connect(process.port, clients, "alpha", tracker_protocol)
    tracker_id = client_id(tracker)
    for other in [target_id] + [row["id"] for row in admin.client_list()]:
        if int(other) == tracker_id:
            continue
        for options in (["REDIRECT", str(other)], ["REDIRECT", str(other), "BCAST", "PREFIX", "a:"],
                        ["OPTIN", "REDIRECT", str(other)], ["REDIRECT", str(other), "NOLOOP", "OPTOUT"]):
            assert REFUSED_REDIRECT in error(ask(tracker, "CLIENT", "TRACKING", "ON", *options))
    assert ask(tracker, "CLIENT", "TRACKING", "OFF", "REDIRECT", str(target_id)) is not None
    admin.set("a:1", "x")
    assert ask(tracker, "GET", "a:1") == b"x"
    admin.set("a:1", "y")
    assert pushes(target, 0.5) == [] and pushes(tracker, 0.1) == []
    assert tracking_flags(admin) == []
    assert ask(target, "PING") == ([b"pong", b""] if target_protocol == 2 else b"PONG")  # not closed


@pytest.mark.parametrize("target_protocol", [2, 3])
@pytest.mark.parametrize("tracker_protocol", [2, 3])
def test_redirect_within_the_application(apps, admin, clients, tracker_protocol, target_protocol):
    """alpha's tracker redirects to alpha's own connection (a RESP2 subscriber of its channel,
    which gets `__redis__:invalidate` messages; a RESP3 one, which gets pushes apart from its
    replies); beta's keys changing reach neither."""
    server, process = apps
    target = connect(process.port, clients, "alpha", target_protocol)
    target_id = client_id(target)
    if target_protocol == 2:
        target.send(["SUBSCRIBE", "a:news"])
        assert target.replies(1) == [[b"subscribe", b"a:news", 1]]
    tracker = connect(process.port, clients, "alpha", tracker_protocol)
    admin.mset({"a:2": "1", "b:2": "1"})
    assert ask(tracker, "CLIENT", "TRACKING", "ON", "REDIRECT", str(target_id)) == b"OK"
    assert ask(tracker, "GET", "a:2") == b"1"
    admin.mset({"a:2": "2", "b:2": "2"})
    expected = [b"message", b"__redis__:invalidate", [b"a:2"]] if target_protocol == 2 else [b"invalidate", [b"a:2"]]
    deadline = time.monotonic() + 5
    got = []
    while not got and time.monotonic() < deadline:
        got = pushes(target, 0.2)
    assert got == [expected]
    if target_protocol == 3:
        assert ask(target, "PING") == b"PONG" and ask(target, "ECHO", "e") == b"e"  # replies still paired
    assert pushes(tracker, 0.1) == []
    assert ask(tracker, "CLIENT", "TRACKING", "OFF") == b"OK"


@pytest.mark.parametrize("protocol", [2, 3])
def test_redirect_checked_on_a_stream_and_in_a_transaction(apps, admin, clients, protocol):
    """After CLIENT REPLY OFF (the client's connection a stream) and inside MULTI the REDIRECT is
    checked too: Redis answers, in its place, that the id does not exist."""
    server, process = apps
    target = connect(process.port, clients, "beta", 3)
    target_id = str(client_id(target))
    tracker = connect(process.port, clients, "alpha", protocol)
    tracker.send(["CLIENT", "REPLY", "OFF"], ["CLIENT", "TRACKING", "ON", "REDIRECT", target_id],
                 ["CLIENT", "REPLY", "ON"], ["MULTI"], ["CLIENT", "TRACKING", "ON", "REDIRECT", target_id],
                 ["EXEC"])
    replies = tracker.replies(4)
    assert replies[:3] == [b"OK", b"OK", b"QUEUED"]
    assert REFUSED_REDIRECT in error(replies[3][0])
    assert tracking_flags(admin) == []
    admin.set("a:s", "1")
    assert ask(tracker, "GET", "a:s") == b"1"
    admin.set("a:s", "2")
    assert pushes(target, 0.3) == []


def test_redirect_needs_the_id_the_proxy_answered(apps, admin, clients):
    """An id of the same application that no CLIENT ID answered through the proxy (found in the
    server's CLIENT LIST) is refused; once it answered it, REDIRECT is accepted."""
    server, process = apps
    target = connect(process.port, clients, "alpha", 3)
    ask(target, "CLIENT", "SETNAME", "target-of-alpha")  # a connection of its own, its id unasked
    found = [row["id"] for row in admin.client_list() if row["name"] == "target-of-alpha"]
    assert len(found) == 1
    tracker = connect(process.port, clients, "alpha", 2)
    assert REFUSED_REDIRECT in error(ask(tracker, "CLIENT", "TRACKING", "ON", "REDIRECT", found[0]))
    assert client_id(target) == int(found[0])
    assert ask(tracker, "CLIENT", "TRACKING", "ON", "REDIRECT", found[0]) == b"OK"
    assert ask(tracker, "CLIENT", "TRACKING", "OFF") == b"OK"


def test_redirect_to_a_closed_connection_is_refused(apps, clients):
    server, process = apps
    target = connect(process.port, clients, "alpha", 3)
    target_id = client_id(target)
    target.close()
    tracker = connect(process.port, clients, "alpha", 3)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        reply = ask(tracker, "CLIENT", "TRACKING", "ON", "REDIRECT", str(target_id))
        if isinstance(reply, hiredis.ReplyError):
            break
        ask(tracker, "CLIENT", "TRACKING", "OFF")
        time.sleep(0.05)
    assert REFUSED_REDIRECT in error(reply)


# -- BCAST and the other forms -----------------------------------------------------------------

@pytest.mark.parametrize("protocol", [2, 3])
def test_bcast_only_under_the_application_prefixes(apps, admin, clients, protocol):
    server, process = apps
    target = None
    redirect = []
    if protocol == 2:  # RESP2: its invalidations go to its own subscriber
        target = connect(process.port, clients, "alpha", 2)
        redirect = ["REDIRECT", str(client_id(target))]
        target.send(["SUBSCRIBE", "a:news"])
        target.replies(1)
    tracker = connect(process.port, clients, "alpha", protocol)
    receiver = target or tracker
    for options in (["BCAST"], ["BCAST", "PREFIX", "b:"], ["BCAST", "PREFIX", "a:", "PREFIX", "b:"],
                    ["BCAST", "PREFIX", ""], ["BCAST", "NOLOOP"]):
        assert "K7" in error(ask(tracker, "CLIENT", "TRACKING", "ON", *redirect, *options))
    assert tracking_flags(admin) == []
    assert ask(tracker, "CLIENT", "TRACKING", "ON", *redirect, "BCAST", "PREFIX", "a:x") == b"OK"
    admin.mset({"b:x1": "1", "a:y1": "1", "a:x1": "1"})
    deadline = time.monotonic() + 5
    got = []
    while not got and time.monotonic() < deadline:
        got = pushes(receiver, 0.2)
    names = [value[-1] for value in got]
    assert names == [[b"a:x1"]]
    assert ask(tracker, "CLIENT", "TRACKING", "OFF") == b"OK"


FORMS = [
    (["ON"], [], [b"a:f"]),
    (["ON", "OPTIN"], [["CLIENT", "CACHING", "YES"]], [b"a:f"]),
    (["ON", "OPTIN"], [], []),  # not opted in: a:f not tracked
    (["ON", "OPTOUT"], [], [b"a:f"]),
    (["ON", "OPTOUT"], [["CLIENT", "CACHING", "NO"]], []),
    (["ON", "NOLOOP"], [], []),  # the client's own write invalidates nothing for it
    (["ON", "BCAST", "PREFIX", "a:", "NOLOOP"], [], []),
]


@pytest.mark.parametrize("options,before,expected", FORMS, ids=[" ".join(form[0]) + (" +caching" if form[1] else "")
                                                                 for form in FORMS])
def test_every_form_tracks_the_client_s_own_keys(apps, admin, clients, options, before, expected):
    """RESP3, every form: the client's own write invalidates what it read (NOLOOP: not for it);
    another application's writes, of keys it could never read, reach it under no form."""
    server, process = apps
    tracker = connect(process.port, clients, "alpha", 3)
    other = connect(process.port, clients, "beta", 3)
    assert ask(tracker, "CLIENT", "TRACKING", *options) == b"OK"
    for command in before:
        assert ask(tracker, *command) == b"OK"
    ask(tracker, "GET", "a:f")
    assert ask(other, "SET", "b:f", "1") == b"OK"
    assert ask(tracker, "SET", "a:f", "1") == b"OK"
    assert ask(tracker, "PING") == b"PONG"
    got = pushes(tracker, 0.3)
    assert [value[1] for value in got] == ([expected] if expected else [])
    assert pushes(other, 0.1) == []


# -- without applications -----------------------------------------------------------------------

def test_no_redirect_into_the_proxy_s_shared_connections(redis_server, proxy, clients):
    """Without applications: the ids of the server's connections (the proxy's shared RESP2 and
    RESP3 pools among them, found with CLIENT LIST) are refused; a RESP3 client on the shared
    connections keeps getting its own replies while a tracker's keys change."""
    direct = redis.Redis(port=redis_server.port)
    bystander = connect(proxy.port, clients, None, 3)
    assert ask(bystander, "SET", "trk:shared", "1") == b"OK"  # the shared RESP3 pool is open
    tracker = connect(proxy.port, clients, None, 2)
    own = client_id(tracker)
    for row in direct.client_list():
        if int(row["id"]) != own:
            assert REFUSED_REDIRECT in error(ask(tracker, "CLIENT", "TRACKING", "ON", "REDIRECT", row["id"]))
    assert ask(tracker, "CLIENT", "TRACKING", "ON", "REDIRECT", str(own)) == b"OK"  # itself
    ask(tracker, "GET", "trk:k")
    direct.set("trk:k", "v")
    for i in range(50):
        assert ask(bystander, "ECHO", str(i)) == str(i).encode()
    assert pushes(bystander, 0.2) == []
    assert ask(tracker, "CLIENT", "TRACKING", "OFF") == b"OK"
    direct.delete("trk:k", "trk:shared")


# -- COPY ... DB and PUBSUB's listings ------------------------------------------------------------

def test_copy_to_another_database_is_refused(apps, admin, clients):
    server, process = apps
    client = connect(process.port, clients, "alpha", 2)
    assert ask(client, "SET", "a:c", "v") == b"OK"
    refusal = error(ask(client, "COPY", "a:c", "a:d", "DB", "1"))
    assert "K7" in refusal and "use key prefixes, not databases" in refusal
    assert "K7" in error(ask(client, "SELECT", "1"))  # the same rule, the same words
    assert redis.Redis(port=server.port, password=UPSTREAM_PASSWORD, db=1).exists("a:d") == 0
    assert ask(client, "COPY", "a:c", "a:d") == 1


@pytest.mark.parametrize("protocol", [2, 3])
def test_pubsub_lists_the_application_s_channels_only(apps, clients, protocol):
    server, process = apps
    listeners = [connect(process.port, clients, app, 2) for app in ("alpha", "beta")]
    for listener, channel in zip(listeners, ("a:chan", "b:chan")):
        listener.send(["SUBSCRIBE", channel])
        assert listener.replies(1)[0][:2] == [b"subscribe", channel.encode()]
    client = connect(process.port, clients, "alpha", protocol)
    assert ask(client, "PUBSUB", "CHANNELS") == [b"a:chan"]
    assert ask(client, "PUBSUB", "CHANNELS", "a:*") == [b"a:chan"]
    assert "K7" in error(ask(client, "PUBSUB", "CHANNELS", "*"))
    assert "K7" in error(ask(client, "PUBSUB", "CHANNELS", "b:*"))
    numsub = ask(client, "PUBSUB", "NUMSUB", "a:chan")
    assert numsub in ([b"a:chan", 1], {b"a:chan": 1})
    assert "K7" in error(ask(client, "PUBSUB", "NUMSUB", "a:chan", "b:chan"))
    assert "K7" in error(ask(client, "PUBSUB", "SHARDNUMSUB", "b:chan"))
    assert ask(client, "PUBSUB", "SHARDCHANNELS") == []


# -- CLIENT KILL on a stream ---------------------------------------------------------------------

def settled_ids(direct) -> set:
    """The server's client ids, once two listings 0.2 s apart agree (earlier tests' connections
    closed)."""
    last = {row["id"] for row in direct.client_list()}
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        time.sleep(0.2)
        now = {row["id"] for row in direct.client_list()}
        if now == last:
            break
        last = now
    return last


@pytest.mark.parametrize("command,reply", [
    (b"CLIENT KILL TYPE normal SKIPME yes", b":0\r\n"),  # ours only: nothing killed
    (b"CLIENT KILL TYPE normal", b":0\r\n"),
    (b"CLIENT KILL ID 9999999", b":0\r\n"),  # can match none of ours: as it is
    (b"CLIENT KILL 127.0.0.1:1", b"-ERR No such client\r\n"),
    (b"CLIENT KILL TYPE bogus", b"-ERR Unknown client type 'bogus'\r\n"),
])
def test_client_kill_on_a_stream_reaches_none_of_the_proxy_s_connections(redis_server, proxy, command, reply):
    """After CLIENT REPLY OFF and ON the client's connection is a stream; a CLIENT KILL there
    went to Redis unseen and closed the proxy's shared connections. Now Redis answers a form
    that matches none of them, in place."""
    direct = redis.Redis(port=redis_server.port)
    redis.Redis(port=proxy.port).set("trk:kill", "1")  # the shared connections are open
    before = settled_ids(direct)
    got, closed = exchange(proxy.port, b"CLIENT REPLY OFF\r\nCLIENT REPLY ON\r\n" + command + b"\r\nPING\r\n",
                           settle=0.5)
    assert (got, closed) == (b"+OK\r\n" + reply + b"+PONG\r\n", False)
    time.sleep(0.2)
    gone = before - {row["id"] for row in direct.client_list()}
    assert len(gone) <= 1  # (the spare the stream took, closed with it): no shared connection killed
    assert redis.Redis(port=proxy.port).get("trk:kill") == b"1"


def test_client_kill_old_form_on_a_stream_spares_the_proxy_s_connection(redis_server, proxy):
    direct = redis.Redis(port=redis_server.port)
    redis.Redis(port=proxy.port).set("trk:kill", "1")
    # The shared connection: the one that ran a command no other test's connection runs (their
    # direct clients' last command is often a SET), once earlier tests' connections are closed.
    assert redis.Redis(port=proxy.port).getrange("trk:kill", 0, 0) == b"1"
    live = settled_ids(direct)
    target = next(row for row in direct.client_list() if row["cmd"] == "getrange" and row["id"] in live)
    got, _ = exchange(proxy.port, b"CLIENT REPLY OFF\r\nCLIENT REPLY ON\r\nCLIENT KILL %s\r\n" % target["addr"].encode(),
                      settle=0.5)
    assert got == b"+OK\r\n-ERR No such client\r\n"
    assert target["id"] in {row["id"] for row in direct.client_list()}
