"""CLIENT KILL that can never reach the proxy's own connections, sans-IO.

Theory of operation: a client's CLIENT KILL runs on Redis, which knows nothing of the proxy: a
filter such as `TYPE normal` would close the shared connections every other client's requests
travel on. The proxy's own connections (shared, control, warm spares) are therefore invisible
to clients, exactly as connections of other servers would be: a kill that names one of them gets
the reply Redis gives for a client it cannot find. `plan` reads the arguments the way
redis-server 7 does (`clientKillCommand`) and says what to do:

* `Forward`: the filters cannot match one of ours (an ID or ADDR of someone else, a USER ours do
  not run as): the command goes to Redis as it is;
* `Reply`: the answer is known here (the old form naming one of our addresses: "No such client";
  a syntax error Redis would give before looking at any client);
* `Resolve`: the filters may match ours. The proxy then asks Redis to check the syntax with the
  same filters and an ID no client has (`validation`), lists the clients (`CLIENT LIST`), picks
  the ones the filters match minus its own (`matching`), and kills those by ID, adding up the
  counts, so the client gets the count Redis would give if ours did not exist.

On a stream (CLIENT REPLY OFF, MONITOR) the command goes to Redis in a form that matches none of
ours (`on_stream`): a kill by filters that may match ours kills nothing there.
"""

from __future__ import annotations

from dataclasses import dataclass

from .. import errors
from .behaviour import strict_int

NO_CLIENT = b"-ERR No such client\r\n"
ARITY = b"-ERR wrong number of arguments for 'client|kill' command\r\n"
NO_SUCH_ID = b"9223372036854775807"  # LONG_MAX: a client id Redis never reaches
TYPES = {b"normal", b"master", b"slave", b"replica", b"pubsub"}


@dataclass(frozen=True)
class Ours:
    """What Redis knows the proxy's own connections by."""

    addrs: frozenset = frozenset()  # b"ip:port" as CLIENT LIST shows them
    users: frozenset = frozenset()  # user names they authenticate as (b"default" without one)


@dataclass(frozen=True)
class Forward:
    pass


@dataclass(frozen=True)
class Reply:
    reply: bytes


@dataclass(frozen=True)
class Resolve:
    filters: dict  # lower-case filter name -> value bytes (the last one given wins, as in Redis)

    def validation(self, args: list[bytes]) -> list[bytes]:
        """The client's command with an ID no client has: Redis's own syntax and user checks,
        and nothing killed."""
        return list(args) + [b"ID", NO_SUCH_ID]


FORWARD = Forward()


def plan(args: list[bytes], ours: Ours):
    """What to do with `CLIENT KILL ...` (args[0:2] are CLIENT KILL)."""
    if len(args) == 3:
        return Reply(NO_CLIENT) if args[2] in ours.addrs else FORWARD
    if len(args) < 3:
        return Reply(ARITY)
    filters = {}
    index = 2
    while index < len(args):
        option = args[index].lower()
        if index + 1 >= len(args):
            return Reply(errors.SYNTAX)
        value = args[index + 1]
        if option == b"id":
            number = strict_int(value)
            if number is None or number < 1:
                return Reply(b"-ERR client-id should be greater than 0\r\n")
            filters[b"id"] = value
        elif option == b"type":
            if value.lower() not in TYPES:
                return Reply(errors.resp_error(f"ERR Unknown client type '{value.decode('utf-8', 'replace')}'"))
            filters[b"type"] = value.lower()
        elif option in (b"addr", b"laddr", b"user"):
            filters[option] = value
        elif option == b"skipme":
            if value.lower() not in (b"yes", b"no"):
                return Reply(errors.SYNTAX)
            filters[b"skipme"] = value.lower()
        else:
            return Reply(errors.SYNTAX)
        index += 2
    if b"user" in filters:
        return Resolve(filters)  # Redis alone knows whether the user exists
    if b"addr" in filters and filters[b"addr"] not in ours.addrs:
        return FORWARD
    return Resolve(filters)


def on_stream(args: list[bytes], decision) -> list[bytes]:
    """What goes to Redis for a CLIENT KILL sent on a stream, where the proxy can neither answer
    in the stream's place nor wait for a listing: the command itself when it cannot match one of
    ours (`Forward`) or Redis refuses it before looking at any client (a syntax error); the old
    form naming one of ours as an address nobody has ("No such client"); filters that may match
    ours with an ID nobody has (`validation`: Redis's checks, nothing killed, 0)."""
    if type(decision) is Forward:
        return list(args)
    if type(decision) is Reply:
        return [*args[:2], NO_SUCH_ID] if decision.reply == NO_CLIENT else list(args)
    return decision.validation(args)


def parse_client_list(text: bytes) -> list[dict]:
    """CLIENT LIST's lines as {field: value} (bytes)."""
    rows = []
    for line in text.split(b"\n"):
        line = line.strip()
        if not line:
            continue
        row = {}
        for field in line.split(b" "):
            name, _, value = field.partition(b"=")
            row[name] = value
        rows.append(row)
    return rows


def client_type(row: dict) -> bytes:
    """getClientType from a CLIENT LIST line's flags."""
    flags = row.get(b"flags", b"")
    if b"M" in flags:
        return b"master"
    if b"S" in flags and b"O" not in flags:
        return b"slave"
    if b"P" in flags:
        return b"pubsub"
    return b"normal"


def matching(filters: dict, rows: list[dict], ours: Ours, caller_addr: bytes | None) -> list[int]:
    """IDs of the clients the filters match, not the proxy's own connections, not the caller's
    (its connection's address, `caller_addr`) with SKIPME yes."""
    wanted_type = filters.get(b"type")
    if wanted_type == b"replica":
        wanted_type = b"slave"
    skipme = filters.get(b"skipme", b"yes") == b"yes"
    found = []
    for row in rows:
        try:
            client_id = int(row.get(b"id", b"0"))
        except ValueError:
            continue
        if row.get(b"addr") in ours.addrs:
            continue
        if b"addr" in filters and row.get(b"addr") != filters[b"addr"]:
            continue
        if b"laddr" in filters and row.get(b"laddr") != filters[b"laddr"]:
            continue
        if wanted_type is not None and client_type(row) != wanted_type:
            continue
        if b"id" in filters and client_id != int(filters[b"id"]):
            continue
        if b"user" in filters and row.get(b"user") != filters[b"user"]:
            continue
        if skipme and caller_addr is not None and row.get(b"addr") == caller_addr:
            continue
        found.append(client_id)
    return found
