"""Many clients sending random commands at once, each checking every reply against its own request.

Two parts. `plan` is sans-IO: for one client and a seed it draws a sequence of steps from the
command table (`tests/commands/arguments.py` makes the arguments), each step one command or a
short group (a transaction, CLIENT REPLY OFF/SKIP around a command, a subscription and back,
SCRIPT DEBUG YES and NO), and says how its reply is checked. `run_clients` is the thin asyncio
part: every client on a raw socket (RESP2, or RESP3 after a first HELLO 3), sending batches of
steps in one write, each step followed by `PING <marker>`; the bytes between two markers are the
step's replies. A marker must come back to its own client, in order, and no reply may carry
another client's tag (its keys, values and names hold it). The same plans run against a second
server directly give the expected replies, compared step by step (`compare`).

A step's reply is compared byte for byte, as a multiset where Redis says the order is not
defined (the `nondeterministic_output_order` tip), or not at all where the reply depends on time,
on the server or on other clients (the `nondeterministic_output` tip, and `NONDETERMINISTIC`
below). A command that writes nondeterministically (SPOP, XADD *) taints the keys it names: a
later command naming a tainted key is not compared either, and taints its keys in turn.
"""

from __future__ import annotations

import asyncio
import random
import re
import time
from dataclasses import dataclass, field

import hiredis

from tests.commands.arguments import LIBRARY, SCRIPTS, CommandDocs, Generator, Namespace
from tests.servers import redis_server_version

# Commands a client never sends here, because they end or take over the test itself or every
# client's data: each with the reason.
EXCLUDED = {
    "quit": "ends the client's connection",
    "shutdown": "ends the server",
    "monitor": "turns the connection into a feed of every client's commands",
    "sync": "turns the connection into a replica link",
    "psync": "turns the connection into a replica link",
    "debug": "can crash, stall or reload the server",
    "pfdebug": "a debugging command",
    "pfselftest": "seconds of CPU",
    "flushall": "deletes every client's keys",
    "flushdb": "deletes every client's keys",
    "swapdb": "moves every client's keys",
    "client|kill": "ends other clients' connections",
    "client|pause": "stalls every client",
    "config|set": "changes the server for everyone",
    "config|resetstat": "changes the server for everyone",
    "config|rewrite": "writes the server's config file",
    "save": "forks the server / writes files",
    "bgsave": "forks the server / writes files",
    "bgrewriteaof": "forks the server / writes files",
    "replicaof": "turns the server into a replica",
    "slaveof": "turns the server into a replica",
    "failover": "hands the server's role away",
    "migrate": "connects to other servers",
    "module|load": "loads code into the server",
    "module|loadex": "loads code into the server",
    "module|unload": "changes the server for everyone",
    "acl|setuser": "changes users for everyone",
    "acl|deluser": "changes users for everyone",
    "acl|load": "changes users for everyone",
    "acl|save": "writes the ACL file",
    "script|flush": "removes the scripts other clients' EVALSHA rely on",
    "function|flush": "removes the library other clients' FCALL rely on",
    "function|delete": "removes the library other clients' FCALL rely on",
    "function|load": "changes the library other clients' FCALL rely on",
    "function|restore": "changes the library other clients' FCALL rely on",
    "latency|reset": "changes what other clients' LATENCY replies hold (harmless, but noise)",
    "slowlog|reset": "changes what other clients' SLOWLOG replies hold (harmless, but noise)",
}
# Sent only inside the groups `plan` builds (so that the marker still gets an answer).
GROUPED = {"multi", "exec", "discard", "client|reply", "subscribe", "psubscribe", "ssubscribe",
           "script|debug"}

# Replies that depend on time, on the server or on other clients although COMMAND INFO has no
# `nondeterministic_output` tip for them: sent, their replies not compared.
NONDETERMINISTIC = {
    "hello": "holds the connection id",
    "client|id": "a connection id",
    "dbsize": "counts every client's keys",
    "config|get": "the two servers differ in port, dir...",
    "expiretime": "relative TTLs set earlier (EXPIRE k 1000) depend on the clock",
    "pexpiretime": "same as EXPIRETIME",
    "lolwut": "art drawn at random",
    "acl|genpass": "random",
    "acl|log": "other clients' failed AUTHs",
    "pubsub|channels": "other clients' channels",
    "pubsub|shardchannels": "other clients' channels",
    "pubsub|numpat": "other clients' patterns",
    "xinfo|stream": "FULL shows consumers' seen-time",
    "memory|usage": "allocator sizes",
    "script|kill": "NOTBUSY, or BUSY when another client's script runs",
    "function|kill": "NOTBUSY, or BUSY when another client's function runs",
}
if (redis_server_version() or (0,)) >= (8,):
    NONDETERMINISTIC.update({
        "role": "Redis 8 counts its replication offset without replicas too: the proxy's own writes move it",
        "auth": "Redis 8.2 leaves a failed AUTH pipelined after another reply unanswered; the proxy answers it",
    })
# Replies that may legitimately hold other clients' names (server-wide views).
SERVER_WIDE = {"scan", "randomkey", "client|list", "slowlog|get", "pubsub|channels",
               "pubsub|shardchannels", "acl|log", "info", "latency|latest", "memory|stats",
               "command|getkeys", "command|getkeysandflags"}
# Not inside a group: commands that do not answer with exactly one reply. Inside MULTI, Redis's
# EXEC counts one reply per command (redis/redis#12207): REPLCONF ACK/GETACK send none, so EXEC
# takes the next command's reply (the marker) as its own; (UN)SUBSCRIBE with N channels sends N,
# and the N-1 extra ones follow EXEC's array as replies nobody asked for.
# AUTH is the proxy's (credentials never reach Redis): inside MULTI it is refused, not queued
# (test_isolation_findings.py: test_auth_inside_multi_is_refused_and_exec_aborts).
NOT_IN_GROUPS = {"replconf", "unsubscribe", "punsubscribe", "sunsubscribe", "auth"}
# Commands that splice bytes or bits into a value: the client's own tag can become another's
# ('rg12' and 'rg11' are two bits apart), so replies reading such a key are not searched for tags.
SCRAMBLES = {"setrange", "setbit", "bitfield", "bitop"}
# Commands that may touch keys of the namespace that are not among their arguments.
READS_NAMESPACE = {"sort", "sort_ro", "keys"}
# Order of elements undefined beyond the tips: SORT over a set iterates it in hash order, ACL CAT
# lists a category's commands in hash order, a PUBLISH matching two patterns sends the two
# pmessages in the order of the pattern dict.
UNORDERED = {"sort", "sort_ro", "acl|cat", "psubscribe"}

# Commands that move a client between shared and own connections (or keep it on its own),
# drawn more often than the rest so that every client changes connection many times a run.
CONNECTION_STATE = (
    "select", "hello", "client|setname", "client|getname", "client|id", "watch", "unwatch", "eval",
    "evalsha", "fcall", "blpop", "brpop", "blmove", "bzpopmin", "xread", "wait", "reset",
    "client|tracking", "client|no-evict", "client|unpause", "script|kill", "replconf", "auth",
    "readonly",
)

# Commands that trip a proxy bug shown by a strict xfail test in test_isolation_findings.py, kept
# out of the mix until it is fixed (name of that test -> which commands).
KNOWN_PROXY_BUGS: dict = {}

BYTES, SORTED, NONE = "bytes", "sorted", "none"
UNSUBSCRIBE = {b"SUBSCRIBE": b"UNSUBSCRIBE", b"PSUBSCRIBE": b"PUNSUBSCRIBE", b"SSUBSCRIBE": b"SUNSUBSCRIBE"}
MARK = b"rgmk:"


@dataclass
class Step:
    commands: list[list[bytes]]
    names: list[str]
    keys: set[bytes]
    check: str  # BYTES, SORTED or NONE
    taints: bool = False  # writes nondeterministically: its keys are tainted after it
    foreign_ok: bool = False  # its replies may hold other clients' tags (see SERVER_WIDE, SCRAMBLES)
    alone: bool = False  # sent only once every reply before it has been read (SCRIPT DEBUG)
    reconnect: bool = False  # once answered, the client closes its connection and opens a new one

    @property
    def label(self) -> str:
        return " ; ".join(b" ".join(c).decode("latin-1")[:120] for c in self.commands)


@dataclass
class Mode:
    """What differs between upstream kinds: commands left out, or sent but not compared."""

    name: str
    left_out: dict = field(default_factory=dict)  # name -> reason
    not_compared: dict = field(default_factory=dict)
    avoid: dict = field(default_factory=dict)  # reason -> predicate on a command's arguments
    not_in_groups: dict = field(default_factory=dict)  # name -> reason
    # name -> what the proxy must answer, given the reference's messages, for that command alone
    # (where the reference is not quite the server the proxy presents: `as_presented`)
    presented: dict = field(default_factory=dict)


STANDALONE = Mode("standalone")


class Planner:
    """Draws steps for one upstream kind: single commands from the whole table (connection-state
    commands more often) and the groups, each with how its reply is checked."""

    def __init__(self, docs: CommandDocs, mode: Mode = STANDALONE):
        self.docs = docs
        self.mode = mode
        self.generator = Generator(docs)
        skip = set(EXCLUDED) | GROUPED | set(mode.left_out)
        self.pool = [name for name in docs.names() if name not in skip and not name.startswith("cluster|")]
        self.state_pool = [name for name in CONNECTION_STATE if name in self.pool]
        self.grouped_pool = [name for name in self.pool
                             if name not in NOT_IN_GROUPS and name not in mode.not_in_groups]
        self.subscribes = [name for name in ("subscribe", "psubscribe", "ssubscribe") if name not in mode.left_out]
        self.publishes = [name for name in ("publish", "spublish") if name not in mode.left_out]
        kinds = {"multi": "multi", "reply": "client|reply", "debug": "script|debug"}
        self.group_kinds = ["multi"] + [kind for kind, name in kinds.items() if name not in mode.left_out]
        if self.subscribes and self.publishes:
            self.group_kinds.append("subscribe")

    def check_of(self, name: str) -> str:
        doc = self.docs[name]
        if ("nondeterministic_output" in doc.tips or name in NONDETERMINISTIC
                or name in self.mode.not_compared):
            return NONE
        if "nondeterministic_output_order" in doc.tips or name in UNORDERED:
            return SORTED
        return BYTES

    def single(self, name: str, rng, ns: Namespace) -> Step:
        made = self.generator.make(name, rng, ns)
        avoided = (*KNOWN_PROXY_BUGS.values(), *self.mode.avoid.values())
        while any(avoid(made.args) for avoid in avoided):
            made = self.generator.make(name, rng, ns)
        doc = self.docs[name]
        keys = set(ns.keys) if name in READS_NAMESPACE else set(made.keys)
        taints = "nondeterministic_output" in doc.tips and "write" in doc.flags
        return Step([made.args], [name], keys, self.check_of(name), taints, name in SERVER_WIDE)

    def steps(self, rng, ns: Namespace) -> list[Step]:
        roll = rng.random()
        if roll < 0.015:
            # A new connection must start with no state of the old one (a lent connection given
            # back must be clean): its name, database, protocol, tracking, WATCH...
            return [Step([[b"CLIENT", b"GETNAME"]], ["client|getname"], set(), BYTES, reconnect=True)]
        if roll < 0.22:
            return [self.single(rng.choice(self.state_pool), rng, ns)]
        if roll < 0.30:
            return self.group(rng, ns)
        return [self.single(rng.choice(self.pool), rng, ns)]

    def group(self, rng, ns: Namespace) -> list[Step]:
        kind = rng.choice(self.group_kinds)
        inner = [self.single(rng.choice(self.grouped_pool), rng, ns) for _ in range(rng.randint(1, 3))]
        if kind == "debug":
            # The Lua debugger armed, then disarmed with no EVAL in between. Redis refuses SCRIPT
            # DEBUG while replies are pending ("must be called outside a pipeline"): alone.
            inner = [s for s in inner if s.names[0] not in ("eval", "evalsha", "eval_ro", "evalsha_ro")]
            return [Step([[b"SCRIPT", b"DEBUG", b"YES"]], ["script|debug"], set(), BYTES, alone=True), *inner,
                    Step([[b"SCRIPT", b"DEBUG", b"NO"]], ["script|debug"], set(), BYTES, alone=True)]
        if kind == "multi":
            # HELLO ... AUTH is the proxy's as AUTH is (NOT_IN_GROUPS): refused inside MULTI, not queued
            inner = [s for s in inner if not (s.names[0] == "hello" and b"AUTH" in (a.upper() for a in s.commands[0]))]
            end = rng.choice(([b"EXEC"], [b"EXEC"], [b"DISCARD"]))
            commands = [[b"MULTI"], *[s.commands[0] for s in inner], end]
        elif kind == "reply":
            commands = [[b"CLIENT", b"REPLY", b"SKIP"], inner[0].commands[0]] if rng.random() < 0.5 else \
                [[b"CLIENT", b"REPLY", b"OFF"], inner[0].commands[0], [b"CLIENT", b"REPLY", b"ON"]]
            inner = inner[:1]
        elif kind == "subscribe":
            subscribe = self.single(rng.choice(self.subscribes), rng, ns)
            publish = self.single(rng.choice(self.publishes), rng, ns)
            inner = [subscribe, publish, *inner[:1]]
            subscribed = subscribe.commands[0]
            # Unsubscribing from all at once answers in the server's hash order: name each one.
            commands = [s.commands[0] for s in inner] + [[UNSUBSCRIBE[subscribed[0]], *subscribed[1:]]]
        checks = [s.check for s in inner]
        check = NONE if NONE in checks else SORTED if SORTED in checks else BYTES
        keys = set().union(*(s.keys for s in inner)) if inner else set()
        return [Step(commands, [kind] + [n for s in inner for n in s.names], keys, check,
                     any(s.taints for s in inner), any(s.foreign_ok for s in inner))]


def plan(planner: Planner, client: int, seed: int, steps: int) -> list[Step]:
    """The steps of client number `client` (its namespace `{rgNN}`) for `seed`."""
    rng = random.Random(seed * 1000 + client)
    ns = Namespace(tag(client))
    out: list[Step] = []
    while len(out) < steps:
        out += planner.steps(rng, ns)
    scrambled: set[bytes] = set()
    for step in out[:steps]:
        if step.keys & scrambled or SCRAMBLES.intersection(step.names):
            scrambled |= step.keys
            step.foreign_ok = True
    return out[:steps]


def tag(client: int) -> str:
    return f"rg{client:02d}"


def marker(client: int, seq: int) -> bytes:
    return b"%s%02d:%d" % (MARK, client, seq)


# -- RESP2/RESP3 replies, with their bytes ------------------------------------------------------

class Incomplete(Exception):
    pass


def parse(buf: bytes, pos: int):
    """(value, end) of the message at `pos`; values are (type byte, payload) tuples."""
    nl = buf.find(b"\r\n", pos)
    if nl < 0:
        raise Incomplete
    kind, line = buf[pos:pos + 1], buf[pos + 1:nl]
    end = nl + 2
    if kind in b"+-:_,#(":
        return (kind, line), end
    if kind in b"$=!":
        length = int(line)
        if length < 0:
            return (kind, None), end
        if len(buf) < end + length + 2:
            raise Incomplete
        return (kind, buf[end:end + length]), end + length + 2
    if kind in b"*~>%|":
        count = int(line)
        if count < 0:
            return (kind, None), end
        items = []
        for _ in range(count * 2 if kind in b"%|" else count):
            item, end = parse(buf, end)
            items.append(item)
        if kind == b"|":  # an attribute: a prefix of the value that follows
            value, end = parse(buf, end)
            return (b"|", (tuple(items), value)), end
        return (kind, tuple(items)), end
    raise ValueError(f"not RESP at {pos}: {buf[pos:pos + 40]!r}")


def canonical(value):
    """A value with every aggregate's elements sorted (maps by pair): for replies whose order
    Redis does not define."""
    kind, payload = value
    if kind in b"*~>" and payload is not None:
        return (kind, tuple(sorted((canonical(v) for v in payload), key=repr)))
    if kind == b"%" and payload is not None:
        pairs = [(canonical(payload[i]), canonical(payload[i + 1])) for i in range(0, len(payload), 2)]
        return (kind, tuple(sorted(pairs, key=repr)))
    return value


def is_marker(value, expected: bytes) -> bool:
    kind, payload = value
    if kind == b"$":
        return payload == expected
    # RESP2, subscribed: PING answers ["pong", message]
    return kind == b"*" and payload is not None and len(payload) == 2 and payload[1] == (b"$", expected)


# -- running ---------------------------------------------------------------------------------

class IsolationError(AssertionError):
    pass


@dataclass
class Outcome:
    replies: list[list[tuple[bytes, object]]]  # per step: (raw bytes, value) of each message
    seconds: float = 0.0


TAG = re.compile(rb"rg(\d\d)")


class Connection:
    """One client's socket, and the reply bytes read from it and not yet parsed."""

    def __init__(self, port: int, read_timeout: float):
        self.port = port
        self.read_timeout = read_timeout
        self.reader = self.writer = None
        self.buf, self.pos = b"", 0

    async def open(self, protocol: int) -> None:
        """A new connection, in RESP3 after a HELLO 3 (whose reply holds the connection id:
        not checked) when the client speaks RESP3."""
        self.close()
        self.reader, self.writer = await asyncio.open_connection("127.0.0.1", self.port)
        self.buf, self.pos = b"", 0
        if protocol == 3:
            await self.send([[b"HELLO", b"3"]])
            await self.message(lambda: "the reply to HELLO 3")

    async def send(self, commands: list[list[bytes]]) -> None:
        self.writer.write(b"".join(hiredis.pack_command(tuple(c)) for c in commands))
        await self.writer.drain()

    async def message(self, waiting_for) -> tuple[bytes, object]:
        """The next whole message: (its bytes, its value); `waiting_for()` says what for, in errors."""
        while True:
            try:
                value, end = parse(self.buf, self.pos)
                raw, self.pos = self.buf[self.pos:end], end
                return raw, value
            except Incomplete:
                pass
            if self.pos:
                self.buf, self.pos = self.buf[self.pos:], 0
            try:
                chunk = await asyncio.wait_for(self.reader.read(1 << 16), self.read_timeout)
            except TimeoutError:
                raise IsolationError(f"nothing more after {self.read_timeout}s: {waiting_for()}") from None
            if not chunk:
                raise IsolationError(f"connection closed: {waiting_for()}")
            self.buf += chunk

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def next_batch(steps: list[Step], seq: int, rng: random.Random) -> list[Step]:
    """1 to 6 steps written at once; a SCRIPT DEBUG step starts a batch, a reconnect ends one."""
    batch = steps[seq:seq + rng.randint(1, 6)]
    alone = next((i for i, step in enumerate(batch) if i and step.alone), None)
    batch = batch[:alone]
    reconnect = next((i for i, step in enumerate(batch) if step.reconnect), None)
    return batch if reconnect is None else batch[:reconnect + 1]


async def run_client(port: int, client: int, steps: list[Step], protocol: int, rng: random.Random,
                     read_timeout: float = 15.0, trace: list | None = None) -> Outcome:
    """One client's steps on one connection (a new one after a reconnect step), in batches, each
    step followed by its marker; IsolationError when a reply is not this client's. `trace`, when
    given, gets the index and size of every batch written, to replay a failure by hand."""
    conn = Connection(port, read_timeout)
    replies: list[list] = []
    started = time.monotonic()
    own = tag(client).encode()
    try:
        await conn.open(protocol)
        seq = 0
        while seq < len(steps):
            batch = next_batch(steps, seq, rng)
            if trace is not None:
                trace.append((seq, len(batch)))
            out = []
            for i, step in enumerate(batch):
                out += step.commands + [[b"PING", marker(client, seq + i)]]
            await conn.send(out)
            if rng.random() < 0.05:
                await asyncio.sleep(0.02)  # a slow reader for a moment: its replies wait in the proxy
            for i, step in enumerate(batch):
                expected = marker(client, seq + i)
                messages: list = []

                def waiting_for(step=step, index=seq + i, messages=messages, expected=expected):
                    return (f"client {client} waits for {expected!r}; step {index}: {step.label}; "
                            f"got so far {[raw[:200] for raw, _ in messages]}")

                while True:
                    raw, value = await conn.message(waiting_for)
                    if is_marker(value, expected):
                        break
                    if MARK in raw:
                        raise IsolationError(f"a marker not its next one: {raw[:200]!r}; {waiting_for()}")
                    if not step.foreign_ok:
                        for found in TAG.finditer(raw):
                            if found.group(0) != own:
                                raise IsolationError(f"bytes of client {found.group(0)!r}: {raw[:300]!r}; "
                                                     f"{waiting_for()}")
                    messages.append((raw, value))
                replies.append(messages)
            seq += len(batch)
            if batch[-1].reconnect:
                await conn.open(protocol)
    finally:
        conn.close()
    return Outcome(replies, time.monotonic() - started)


async def run_all(port: int, plans: list[list[Step]], protocols: list[int], seed: int) -> list[Outcome]:
    tasks = [run_client(port, client, steps, protocols[client], random.Random(seed * 7919 + client))
             for client, steps in enumerate(plans)]
    return await asyncio.gather(*tasks)


def run_clients(port: int, plans: list[list[Step]], protocols: list[int], seed: int,
                timeout: float = 120.0) -> list[Outcome]:
    return asyncio.run(asyncio.wait_for(run_all(port, plans, protocols, seed), timeout))


def invalidation(value) -> bool:
    """CLIENT TRACKING's push. In BCAST mode Redis sends it from its event loop's end
    (`beforeSleep`), so where it falls among a client's replies depends on how its commands were
    read, not only on their order: it is left out of the comparison (tests/integration/
    test_tracking.py checks where it goes)."""
    if type(value) is not tuple:
        return False
    kind, payload = value
    return kind == b">" and bool(payload) and payload[0] == (b"$", b"invalidate")


def compare(plans: list[list[Step]], got: list[Outcome], expected: list[Outcome]) -> list[str]:
    """Every step whose replies differ where they must not; tainted keys followed."""
    problems = []
    for client, steps in enumerate(plans):
        tainted: set[bytes] = set()
        for index, step in enumerate(steps):
            mine = [message for message in got[client].replies[index] if not invalidation(message[1])]
            theirs = [message for message in expected[client].replies[index] if not invalidation(message[1])]
            check = step.check
            if step.keys & tainted:
                check = NONE
                tainted |= step.keys
            if step.taints:
                tainted |= step.keys
            if check == BYTES:
                same = [raw for raw, _ in mine] == [raw for raw, _ in theirs]
            elif check == SORTED:
                same = sorted((canonical(v) for _, v in mine), key=repr) == \
                    sorted((canonical(v) for _, v in theirs), key=repr)
            else:
                continue
            if not same:
                problems.append(f"client {client} step {index} ({check}): {step.label}\n"
                                f"    got:      {b''.join(r for r, _ in mine)[:400]!r}\n"
                                f"    expected: {b''.join(r for r, _ in theirs)[:400]!r}")
    return problems


def as_presented(mode: Mode, plans: list[list[Step]], expected: list[Outcome]) -> None:
    """The reference's replies made what the proxy presents, by `mode.presented`, for each step
    that is one such command alone (in place)."""
    if not mode.presented:
        return
    for client, steps in enumerate(plans):
        for index, step in enumerate(steps):
            if len(step.names) == 1 and step.names[0] in mode.presented:
                replies = expected[client].replies
                replies[index] = mode.presented[step.names[0]](replies[index])


def prepare(port: int) -> None:
    """What every generated command may rely on, on a server: the scripts EVALSHA names and the
    library FCALL calls (loaded once, before the clients start)."""
    import socket

    commands = [(b"SCRIPT", b"LOAD", s.encode()) for s in SCRIPTS]
    commands.append((b"FUNCTION", b"LOAD", b"REPLACE", LIBRARY.encode()))
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(b"".join(hiredis.pack_command(c) for c in commands))
        reader = hiredis.Reader()
        answers = []
        while len(answers) < len(commands):
            reader.feed(sock.recv(65536))
            while (reply := reader.gets()) is not False:
                answers.append(reply)
    errors = [a for a in answers if isinstance(a, hiredis.ReplyError)]
    if errors:
        raise RuntimeError(f"could not prepare the server on {port}: {errors}")
