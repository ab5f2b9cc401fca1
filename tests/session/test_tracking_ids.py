"""session/tracking.py without a server: which REDIRECT values CLIENT TRACKING carries, how a
refused one is made to name nobody, and whose connection an id handed out is (issue 49)."""


from proxy.session import tracking
from proxy.session.clientkill import NO_SUCH_ID


def words(text: str) -> list[bytes]:
    return [word.encode() for word in text.split()]


def test_redirect_values_as_redis_reads_them():
    assert tracking.redirects(words("CLIENT TRACKING ON REDIRECT 7 BCAST")) == [b"7"]
    assert tracking.redirects(words("client tracking on prefix redirect redirect 9")) == [b"9"]  # PREFIX's value
    assert tracking.redirects(words("CLIENT TRACKING ON REDIRECT 1 REDIRECT 2")) == [b"1", b"2"]
    assert tracking.redirects(words("CLIENT TRACKING ON REDIRECT")) == []  # Redis: syntax error
    assert tracking.redirects(words("CLIENT TRACKING OFF")) == []


def test_naming_nobody_replaces_the_refused_values_only():
    args = words("CLIENT TRACKING ON PREFIX 5 REDIRECT 5 REDIRECT 6 NOLOOP")
    assert tracking.naming_nobody(args, {b"5"}) == [*words("CLIENT TRACKING ON PREFIX 5 REDIRECT"), NO_SUCH_ID,
                                                    *words("REDIRECT 6 NOLOOP")]
    assert tracking.naming_nobody(args)[6::2] == [NO_SUCH_ID, NO_SUCH_ID]


class Conn:
    def __init__(self):
        self.owner = None
        self.closed = False
        self.pushes_to = None

    def take_pushes(self, session):
        self.pushes_to = session


class Proxy:
    def __init__(self):
        self.sessions = set()


class Session:
    def __init__(self, proxy, app=None, host="10.0.0.1"):
        self.proxy, self.app, self.peer = proxy, app, (host, 40000)
        self.own = Conn()
        self.own.owner = self
        proxy.sessions.add(self)


def test_an_id_names_a_connection_of_the_same_client_only():
    proxy = Proxy()
    ids = tracking.handed_ids(proxy)
    alpha, alpha2, beta = Session(proxy, "alpha", "10.0.0.1"), Session(proxy, "alpha", "10.0.0.2"), Session(proxy, "beta")
    ids.record(11, alpha, alpha.own)
    ids.record(12, beta, beta.own)
    assert ids.target(11, alpha2) is alpha.own  # same application, another host
    assert ids.target(12, alpha2) is None  # another application
    assert ids.target(13, alpha2) is None  # never handed out
    plain, same_host, other_host = Session(proxy, None, "10.0.0.9"), Session(proxy, None, "10.0.0.9"), \
        Session(proxy, None, "10.0.0.8")
    ids.record(21, plain, plain.own)
    assert ids.target(21, same_host) is plain.own and ids.target(21, other_host) is None
    assert ids.target(21, alpha) is None  # an application is not a host
    args = words("CLIENT TRACKING ON REDIRECT 21")
    assert tracking.checked(same_host, args) is None and plain.own.pushes_to is plain
    assert tracking.checked(other_host, args)[-1] == NO_SUCH_ID


def test_an_id_is_the_session_s_while_it_holds_that_connection():
    proxy = Proxy()
    ids = tracking.handed_ids(proxy)
    first, second, third = Session(proxy, "a"), Session(proxy, "a"), Session(proxy, "a")
    ids.record(1, first, first.own)
    ids.record(2, second, second.own)
    ids.record(3, third, third.own)
    first.own = Conn()  # it moved to another connection (a new AUTH)
    second.own.closed = True
    proxy.sessions.discard(third)  # it left
    assert [ids.target(n, first) for n in (1, 2, 3)] == [None, None, None]


def test_departed_sessions_are_swept():
    proxy = Proxy()
    ids = tracking.handed_ids(proxy)
    keep = Session(proxy, "a")
    ids.record(0, keep, keep.own)
    for n in range(1, 5000):
        gone = Session(proxy, "a")
        ids.record(n, gone, gone.own)
        proxy.sessions.discard(gone)
    assert len(ids.by_id) <= tracking.PRUNE_FLOOR + 1 and ids.target(0, keep) is keep.own
