"""CLIENT INFO and CLIENT LIST in front of a cluster: the proxy's own view of its clients.

A cluster client has no connection of its own on any node: a node's CLIENT INFO would describe
one of the proxy's shared connections (an id that is not the one CLIENT ID gave, no name), and a
node's CLIENT LIST the proxy's connections to that node. The proxy keeps a cluster client's
connection state itself (`ClusterClient`: its id, its name), so it answers these as one server
would describe that client: CLIENT INFO its line, CLIENT LIST the lines of the proxy's clients
that are the same client (the same application under `applications:`, else the same client host,
as for a CLIENT TRACKING REDIRECT: a library's pool sees its own connections, never another
application's), in Redis 7.0's format and its errors. The sizes of buffers, which the proxy does
not keep per client, show as 0; `cmd=` the last command of the client's last batch, whose name the
session keeps (a reference, once per batch) and which is named here only when asked. Sans-IO but
for the look at sessions (`lines_of`).
"""

from __future__ import annotations

import time

from ...session.behaviour import strict_int
from ...session.states import CLOSED
from ...session.tracking import same_client
from .sides import monitoring

__all__ = ["View", "line", "client_info", "client_list", "view_of", "last_command", "same_sessions", "lines_of"]

TYPES = {b"normal": "normal", b"slave": "replica", b"replica": "replica", b"pubsub": "pubsub", b"master": "master"}
SYNTAX = b"-ERR syntax error\r\n"
INVALID_ID = b"-ERR Invalid client ID\r\n"


class View:
    """What CLIENT INFO shows of one client."""

    __slots__ = ("id", "addr", "laddr", "fd", "name", "age", "flags", "sub", "psub", "ssub", "multi", "cmd",
                 "user", "resp")

    def __init__(self, id, addr="", laddr="", fd=-1, name=b"", age=0, flags="N", sub=0, psub=0, ssub=0, multi=-1,
                 cmd="NULL", user="default", resp=2):
        self.id = id
        self.addr = addr
        self.laddr = laddr
        self.fd = fd
        self.name = name
        self.age = age
        self.flags = flags
        self.sub = sub
        self.psub = psub
        self.ssub = ssub
        self.multi = multi
        self.cmd = cmd
        self.user = user
        self.resp = resp

    @property
    def type(self) -> str:
        return "pubsub" if "P" in self.flags else "normal"


def line(view: View) -> bytes:
    """One line of CLIENT LIST (and CLIENT INFO's), as Redis 7.0 writes it."""
    return (b"id=%d addr=%s laddr=%s fd=%d name=%s age=%d idle=0 flags=%s db=0 sub=%d psub=%d ssub=%d multi=%d "
            b"qbuf=0 qbuf-free=0 argv-mem=0 multi-mem=0 rbs=0 rbp=0 obl=0 oll=0 omem=0 tot-mem=0 events=r "
            b"cmd=%s user=%s redir=-1 resp=%d\n") % (
        view.id, view.addr.encode(), view.laddr.encode(), view.fd, view.name, view.age, view.flags.encode(),
        view.sub, view.psub, view.ssub, view.multi, view.cmd.encode(), view.user.encode(), view.resp)


def _text(text: bytes, protocol: int) -> bytes:
    """A verbatim string in RESP3 (txt), a bulk string in RESP2: what Redis answers these with."""
    if protocol == 3:
        return b"=%d\r\ntxt:%s\r\n" % (len(text) + 4, text)
    return b"$%d\r\n%s\r\n" % (len(text), text)


def client_info(view: View, protocol: int) -> bytes:
    return _text(line(view), protocol)


def client_list(args, views, protocol: int) -> bytes:
    """CLIENT LIST [TYPE type | ID id...] over `views`, read as redis-server 7.0 reads it."""
    wanted_type = None
    ids = None
    if len(args) == 4 and args[2].lower() == b"type":
        wanted_type = TYPES.get(args[3].lower())
        if wanted_type is None:
            return b"-ERR Unknown client type '%s'\r\n" % args[3].replace(b"\r", b" ").replace(b"\n", b" ")
    elif len(args) > 3 and args[2].lower() == b"id":
        ids = set()
        for arg in args[3:]:
            number = strict_int(arg)
            if number is None or not -(1 << 63) <= number < (1 << 63):
                return INVALID_ID
            ids.add(number)
    elif len(args) != 2:
        return SYNTAX
    chosen = [view for view in sorted(views, key=lambda view: view.id)
              if (wanted_type is None or view.type == wanted_type) and (ids is None or view.id in ids)]
    return _text(b"".join(line(view) for view in chosen), protocol)


def _address(address) -> str:
    if isinstance(address, tuple) and len(address) >= 2:
        host = address[0]
        return f"[{host}]:{address[1]}" if ":" in host else f"{host}:{address[1]}"
    return f"{address}:0" if address else ""


def view_of(session, cmd: str = "NULL") -> View:
    """The client as the proxy knows it (`cmd`: the command it ran last, when known)."""
    client = session.extra
    transport = session.transport
    sock = transport.get_extra_info("socket") if transport is not None else None
    laddr = transport.get_extra_info("sockname") if transport is not None else None
    subscriptions = session.pubsub
    flags = ""
    if monitoring(session):
        flags += "O"
    if subscriptions is not None and subscriptions.active:
        flags += "P"
    if session.state.in_transaction:
        flags += "x"
    if getattr(client, "no_evict", False):  # (CLIENT NO-EVICT ON: handlers.client_no_evict)
        flags += "e"
    born = getattr(client, "born", None)
    return View(
        id=client.id, addr=_address(session.peer), laddr=_address(laddr), fd=sock.fileno() if sock is not None else -1,
        name=client.name or b"", age=int(time.monotonic() - born) if born is not None else 0, flags=flags or "N",
        sub=subscriptions.channels if subscriptions is not None else 0,
        psub=subscriptions.patterns if subscriptions is not None else 0,
        ssub=subscriptions.shard if subscriptions is not None else 0,
        multi=0 if session.state.in_transaction else -1, cmd=cmd, user=session.app or "default",
        resp=session.protocol)


def last_command(session) -> str:
    """The name Redis shows as cmd= for the client's last command (`container|sub` for a
    subcommand; NULL for none, an unknown command or an unknown subcommand, as Redis), derived
    here from the name and second argument the session keeps of its last batch's last command."""
    name = session.last_name
    if name is None:
        return "NULL"
    sub = session.last_sub
    spec = session.backend.behaviour.table.lookup((name,) if sub is None else (name, sub))
    if spec is None or (sub is not None and spec.subcommands):  # (lookup gives the container for an unknown one)
        return "NULL"
    return spec.name


def same_sessions(session) -> list:
    """The proxy's clients that are the same client as `session` (itself first): the same
    application under `applications:`, else the same client host."""
    who = same_client(session)
    return [session] + [other for other in session.proxy.sessions
                        if other is not session and other.backend is session.backend
                        and other.state.life is not CLOSED and same_client(other) == who]


def lines_of(session) -> list:
    """The views of `same_sessions` (CLIENT LIST)."""
    return [view_of(other, "client|list" if other is session else last_command(other))
            for other in same_sessions(session)]
