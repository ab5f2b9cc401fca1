"""What clients send, learned without changing anything (`serve --learn FILE`, `learn:`), and read
back by `policy infer --from-traffic FILE`.

Recording
---------
`Learner.observe(commands, index, state, app, peer)` has the shadow policy's contract
(`policy/shadow.py`): the session calls it for each command the enforcing policy lets through,
and it returns nothing, never raises, never changes a command. The proxy installs it in the
session's shadow slot (`observing`: alone, or beside a shadow policy), so without `learn:` the
session runs exactly as before (no call, no test), and with it each command costs one call: a
lookup of the command's name, a counter, and for a command with keys the shape of its first key
(its segments, variable parts replaced by their class: `segments.Classifier`), with what it says
of a TTL (`_ttl.ttl_args`). Per client (its application name, else its host) it keeps the
commands and their counts, the key shapes with the commands on them, an example key, the TTLs set
and the writes that set none, and the scripts run (EVAL's body by SHA1, EVALSHA's SHA1, FCALL's
function). Every call is counted; the first `SAMPLE_AFTER` calls of a command per client are recorded in
full, then one in `SAMPLE_MASK + 1` (scripts and commands with subcommands always): so a hot
command costs a dict lookup and an increment, and the shapes' counts are of the calls recorded.
Everything is bounded: `MAX_CLIENTS` clients, `MAX_NAMES` command names and `MAX_SHAPES` shapes
per client, `MAX_SCRIPTS` scripts; past that, what does not fit is counted under "(other)" or in
`dropped`.
`snapshot()` is the record as plain data, which `LearnWriter` writes to the file every
`FLUSH_INTERVAL` seconds (and at exit), atomically (a temporary file renamed).

Reading back
------------
`load(path)` reads a record as a `Learned`; the draft asks it for its policy lines (the command
categories never used, denied by C2; the O(N) reads in use, kept visible by C3 `warn`) and its
review comments (the scripts seen, for C6's approved library; per client its commands; key
shapes that no pattern of the draft covers), and for the TTLs set per key pattern (`ttl_for`).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
import os
import time

from ..commands.table import CommandTable
from ..policy.rules._ttl import TTL_TABLE, ttl_args
from .segments import CLASSES, Classifier

log = logging.getLogger("redis_guard.learn")

VERSION = 1
FLUSH_INTERVAL = 30.0
MAX_CLIENTS = 256
MAX_SHAPES = 512
MAX_SCRIPTS = 256
MAX_NAMES = 512  # command names as sent (in any case) per client
SAMPLE_AFTER = 64  # calls of a command per client recorded in full before sampling
SAMPLE_MASK = 15  # then one call in 16 has its key shape and TTL recorded
SHAPE_CACHE = 1 << 14  # keys whose shape is remembered (hot keys cost a lookup)
OTHER = "(other)"
# Whole-collection reads: their cost grows with the data (C3's concern)
O_N_READS = frozenset({"hgetall", "hkeys", "hvals", "smembers", "sinter", "sunion", "sdiff", "lrange", "zrange",
                       "zrevrange", "zrangebyscore", "zrevrangebyscore", "zrangebylex", "zrevrangebylex", "sort",
                       "sort_ro", "xrange", "xrevrange", "keys", "sintercard", "zunion", "zinter", "zdiff"})
# Command categories C2 can deny when no command of them was used
DENIABLE = ("pubsub", "stream", "scripting", "geo", "hyperloglog", "bitmap", "blocking", "transaction")
SCRIPTS = {"eval": "eval", "eval_ro": "eval", "evalsha": "evalsha", "evalsha_ro": "evalsha", "fcall": "fcall",
           "fcall_ro": "fcall"}
PLACEHOLDER_NAMES = {cls: "{" + entry[1] + "}" for cls, entry in CLASSES.items()}


_NOBODY = object()


class TrafficError(Exception):
    """A learn file that cannot be read."""


class _Client:
    __slots__ = ("raw", "subcommands", "shapes", "scripts")

    def __init__(self):
        self.raw: dict[bytes, list] = {}  # command name as sent -> [count, every call recorded]
        self.subcommands: dict[str, int] = {}  # 'client|setname' -> calls
        self.shapes: dict[str, list] = {}  # shape -> [count, {command: n}, example, ttl writes, min, max, plain writes]
        self.scripts: dict[str, list] = {}  # id -> [kind, count, preview]


class Learner:
    """Records commands per client (see the module's docstring)."""

    def __init__(self, table, delimiter: str = ":", clock=time.time):
        self.table = table
        self.delimiter = delimiter
        self._split = delimiter.encode()
        self.classify = Classifier(delimiter)
        self.clients: dict[str, _Client] = {}
        self.names: dict[bytes, object] = {}  # command name as sent -> (spec, name) or None
        self.shapes: dict[bytes, str] = {}  # key -> shape, for keys used again (bounded)
        self.scripts = 0
        self.dropped = {"clients": 0, "shapes": 0, "scripts": 0}
        self._peer = self._app = _NOBODY  # the connection of the last command, and its client
        self._current = None
        self.clock = clock
        self.started = clock()

    @property
    def name(self) -> str:
        return "none"

    # -- the session's entry point ------------------------------------------------------------

    def observe(self, commands, index: int, state, app, peer) -> None:
        args = commands[index]
        try:
            if peer is self._peer and app is self._app:  # the same connection as the last command
                client = self._current
            else:
                client = self._switch(app, peer)
            seen = client.raw.get(args[0])
            if seen is None:
                seen = self._name(client, args[0])
            n = seen[0] = seen[0] + 1
            if n > SAMPLE_AFTER and n & SAMPLE_MASK and not seen[1]:
                return  # counted; its keys and TTLs are sampled
            self._record(client, args)
        except Exception:  # learning must never touch the traffic
            log.exception("learn: failed on a command")

    def _switch(self, app, peer) -> _Client:
        if app is not None:
            who = app
        elif peer.__class__ is tuple:
            who = peer[0]  # the host: a client's connections are one client
        else:  # a Unix socket's peer (a path, often empty), or none
            who = str(peer) if peer else "(local)"
        client = self.clients.get(who)
        if client is None:
            client = self._client(who)
        self._peer, self._app, self._current = peer, app, client
        return client

    def _client(self, who) -> _Client:
        if not isinstance(who, str):
            who = str(who)
        client = self.clients.get(who)
        if client is None:
            if len(self.clients) >= MAX_CLIENTS:
                self.dropped["clients"] += 1
                who = OTHER
                client = self.clients.get(OTHER)
            if client is None:
                client = self.clients[who] = _Client()
        return client

    def _name(self, client: _Client, raw: bytes) -> list:
        """A command name as sent, first seen for this client: its counter, and whether every call
        is recorded (scripts, and commands with subcommands), not one in SAMPLE_MASK + 1."""
        if len(client.raw) >= MAX_NAMES:
            raw = b"(other)"
            seen = client.raw.get(raw)
            if seen is not None:
                return seen
        spec = self.table.lookup([raw])
        always = spec is None or bool(spec.subcommands) or spec.name in SCRIPTS
        seen = client.raw[raw] = [0, always]
        return seen

    def _record(self, client: _Client, args) -> None:
        entry = self.names.get(args[0])
        if entry is None:
            spec = self.table.lookup(args[:1])
            entry = (spec, spec.name if spec is not None else args[0].decode("utf-8", "replace").lower()[:40])
            if len(self.names) < 4096:
                self.names[args[0]] = entry
        spec, name = entry
        if spec is not None and spec.subcommands and len(args) > 1:
            sub = self.table.lookup(args)
            if sub is not None:
                spec, name = sub, sub.name
                subcommands = client.subcommands
                subcommands[name] = subcommands.get(name, 0) + 1
        kind = SCRIPTS.get(name)
        if kind is not None and len(args) > 1:
            self._script(client, kind, args[1])
            return
        if spec is None or not spec.has_keys or len(args) < 2:
            return
        key = args[1] if spec.key_at_first_argument else _first_key(spec, args)
        if key is None:
            return
        shape = self.shapes.get(key)
        if shape is None:
            shape = self.shape(key)
            if len(self.shapes) >= SHAPE_CACHE:
                self.shapes.clear()
            self.shapes[key] = shape
        shapes = client.shapes
        found = shapes.get(shape)
        if found is None:
            if len(shapes) >= MAX_SHAPES:
                self.dropped["shapes"] += 1
                shape = OTHER
                found = shapes.get(OTHER)
            if found is None:
                found = shapes[shape] = [0, {}, key[:200], 0, None, None, 0]
        found[0] += 1
        on = found[1]
        on[name] = on.get(name, 0) + 1
        ttl = ttl_args(name, args) if name in TTL_TABLE else None
        if ttl is not None and ttl.ttls:
            at, unit, absolute = ttl.ttls[0]
            try:
                seconds = float(args[at]) * unit
            except (ValueError, IndexError):
                return
            if absolute:
                seconds -= self.clock()
            seconds = int(seconds)
            found[3] += 1
            found[4] = seconds if found[4] is None else min(found[4], seconds)
            found[5] = seconds if found[5] is None else max(found[5], seconds)
        elif "write" in spec.flags and ttl is None and name not in ("del", "unlink"):
            found[6] += 1

    def _script(self, client: _Client, kind: str, body: bytes) -> None:
        if kind == "eval":
            ident = hashlib.sha1(body).hexdigest()
            preview = body[:80].decode("utf-8", "replace").replace("\n", " ")
        else:
            ident = body[:80].decode("utf-8", "replace")
            preview = ""
        found = client.scripts.get(ident)
        if found is None:
            if self.scripts >= MAX_SCRIPTS:
                self.dropped["scripts"] += 1
                return
            self.scripts += 1
            found = client.scripts[ident] = [kind, 0, preview]
        found[1] += 1

    def shape(self, key: bytes) -> str:
        """The key with its variable segments replaced by their class's placeholder."""
        classify = self.classify
        parts = []
        for segment in key.split(self._split, 15):
            cls = classify(segment)
            parts.append(PLACEHOLDER_NAMES[cls] if cls is not None else segment.decode("utf-8", "replace"))
        return self.delimiter.join(parts)

    # -- as data --------------------------------------------------------------------------------

    def _commands(self, client: _Client) -> dict[str, int]:
        """The calls of each command (its lower-case name; a container's calls under its own name)."""
        counts: dict[str, int] = {}
        for raw, (count, _) in list(client.raw.items()):
            spec = self.table.lookup([raw])
            name = spec.name if spec is not None else raw.decode("utf-8", "replace").lower()[:40]
            counts[name] = counts.get(name, 0) + count
        return dict(sorted(counts.items(), key=lambda item: -item[1]))

    def snapshot(self) -> dict:
        now = self.clock()
        return {
            "version": VERSION,
            "started": self.started,
            "updated": now,
            "seconds": round(now - self.started, 1),
            "commands": sum(count for client in self.clients.values() for count, _ in client.raw.values()),
            "delimiter": self.delimiter,
            "dropped": dict(self.dropped),
            "sampling": {"after": SAMPLE_AFTER, "one_in": SAMPLE_MASK + 1},
            "clients": {who: {
                "commands": self._commands(client),
                "subcommands": dict(client.subcommands),
                "shapes": {shape: {"count": s[0], "commands": s[1],
                                   "example": s[2].decode("utf-8", "backslashreplace"),
                                   "ttl_writes": s[3], "ttl_min": s[4], "ttl_max": s[5], "plain_writes": s[6]}
                           for shape, s in client.shapes.items()},
                "scripts": {ident: {"kind": s[0], "count": s[1], "preview": s[2]}
                            for ident, s in client.scripts.items()},
            } for who, client in self.clients.items()},
        }


def _first_key(spec, args):
    """The first key of a command whose key spec is an index (most are), else None."""
    for ks in spec.key_specs:
        if "NOT_KEY" in ks.flags:
            continue
        begin = ks.begin_search
        if begin.kind == "index" and begin.pos < len(args):
            return args[begin.pos]
        return None
    return None


class Observers:
    """A shadow policy and the learner, both observing (the session's one shadow slot)."""

    def __init__(self, shadow, learner: Learner):
        self.shadow = shadow
        self.learner = learner
        self.name = shadow.name

    def observe(self, commands, index: int, state, app, peer) -> None:
        self.shadow.observe(commands, index, state, app, peer)
        self.learner.observe(commands, index, state, app, peer)


def observing(shadow, learner: Learner | None):
    """What goes in the proxy's shadow slot: the shadow policy, the learner, or both."""
    if learner is None:
        return shadow
    if shadow is None:
        return learner
    return Observers(shadow, learner)


class LearnWriter:
    """Writes the learner's record to `path` every `interval` seconds and at `close()`."""

    def __init__(self, learner: Learner, path: str, interval: float = FLUSH_INTERVAL):
        self.learner = learner
        self.path = path
        self.interval = interval
        self.task = None

    def write(self) -> None:
        data = self.learner.snapshot()
        temporary = f"{self.path}.{os.getpid()}.tmp"
        try:
            with open(temporary, "w", encoding="utf-8") as handle:
                json.dump(data, handle, indent=1)
            os.replace(temporary, self.path)
        except OSError as exc:
            log.error("learn: cannot write %s: %s", self.path, exc)

    def start(self, loop) -> None:
        self.task = loop.create_task(self._run())

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval)
            self.write()

    def close(self) -> None:
        if self.task is not None:
            self.task.cancel()
        self.write()


# -- reading back -----------------------------------------------------------------------------------


class Learned:
    """A record read back, merged over clients, with what the draft asks of it."""

    def __init__(self, data: dict, table=None):
        self.data = data
        self.table = table or CommandTable.from_snapshot()
        self.clients = data.get("clients", {})
        self.commands: dict[str, int] = {}
        self.subcommands: set[str] = set()
        for client in self.clients.values():
            for name, count in client.get("commands", {}).items():
                self.commands[name] = self.commands.get(name, 0) + count
            self.subcommands.update(client.get("subcommands", {}))
        self.uncovered: list[tuple[str, int, str]] = []  # shapes no draft pattern matches (set by the draft)

    def categories_unused(self) -> list[str]:
        used = set()
        for name in (*self.commands, *self.subcommands):
            spec = self.table._by_name.get(name) if hasattr(self.table, "_by_name") else None
            if spec is not None:
                used |= spec.acl_categories
        return [cat for cat in DENIABLE if cat not in used]

    def reads(self) -> dict[str, int]:
        return {name: count for name, count in sorted(self.commands.items()) if name in O_N_READS}

    def scripts(self) -> list[tuple[str, str, int, str, list[str]]]:
        merged: dict[str, list] = {}
        for who, client in self.clients.items():
            for ident, s in client.get("scripts", {}).items():
                entry = merged.setdefault(ident, [s["kind"], 0, s.get("preview", ""), []])
                entry[1] += s["count"]
                entry[3].append(who)
        return sorted(((ident, *entry) for ident, entry in merged.items()), key=lambda item: -item[2])

    def shapes(self):
        """(shape, example key, count, ttl writes, ttl min, ttl max, plain writes) merged over clients."""
        merged: dict[str, list] = {}
        for client in self.clients.values():
            for shape, s in client.get("shapes", {}).items():
                if shape == OTHER:
                    continue
                entry = merged.setdefault(shape, [s["example"], 0, 0, None, None, 0])
                entry[1] += s["count"]
                entry[2] += s["ttl_writes"]
                if s["ttl_min"] is not None:
                    entry[3] = s["ttl_min"] if entry[3] is None else min(entry[3], s["ttl_min"])
                    entry[4] = s["ttl_max"] if entry[4] is None else max(entry[4], s["ttl_max"])
                entry[5] += s["plain_writes"]
        return [(shape, *entry) for shape, entry in merged.items()]

    def c2_line(self) -> str:
        unused = self.categories_unused()
        if not unused:
            return "  C2: {baseline: true}  # the baseline guard; every command category was used"
        cats = ", ".join(f'"@{cat}"' for cat in unused)
        return (f"  C2: {{baseline: true, deny: [{cats}]}}  # the baseline guard, and the categories no client "
                "used (traffic)")

    def policy_lines(self) -> list[str]:
        lines = []
        total = sum(self.commands.values())
        seconds = self.data.get("seconds", 0)
        lines.append(f"  # From traffic: {total:,} commands of {len(self.clients)} clients over {seconds:,.0f} s")
        reads = self.reads()
        if reads:
            items = ", ".join(f"{name.upper()}: {{action: warn}}" for name in reads)
            seen = ", ".join(f"{name.upper()} {count:,}" for name, count in reads.items())
            lines.append(f"  C3: {{commands: {{{items}}}}}  # O(N) reads in use ({seen}): logged, "
                         "then bound them (action: limit, max: N)")
        return lines

    def review_lines(self) -> list[str]:
        lines = ["", "# From traffic, to review:"]
        for ident, kind, count, preview, who in self.scripts():
            what = f"EVAL sha1 {ident}: {preview!r}" if kind == "eval" else f"{kind.upper()} {ident}"
            lines.append(f"#   script {what}, {count:,} calls by {', '.join(who[:5])}: review it for C6's "
                         "approved library (C6: {scripts: approved, library: DIR})")
        for who, client in sorted(self.clients.items()):
            commands = client.get("commands", {})
            shown = ", ".join(f"{name.upper()} {count:,}" for name, count in list(commands.items())[:15])
            more = f" and {len(commands) - 15} more" if len(commands) > 15 else ""
            lines.append(f"#   client {who}: {shown}{more}")
        for shape, count, example in self.uncovered[:30]:
            lines.append(f"#   keys used by traffic that no pattern covers: {shape} ({count:,} commands, e.g. "
                         f"{example}): K10 would reject them")
        dropped = self.data.get("dropped", {})
        if any(dropped.values()):
            lines.append(f"#   not recorded (bounds): {dropped}")
        return lines


def _read(path: str) -> dict:
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise TrafficError(f"cannot read the learn file {path}: {exc}") from None
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("clients"), dict):
        raise TrafficError(f"{path}: not a record of `serve --learn` (version {VERSION})")
    return data


def merge(records: list[dict]) -> dict:
    """Several records (one per worker process) as one: counts added, TTL ranges joined."""
    out = {"version": VERSION, "seconds": max(r.get("seconds", 0) for r in records),
           "commands": sum(r.get("commands", 0) for r in records), "clients": {},
           "dropped": {key: sum(r.get("dropped", {}).get(key, 0) for r in records)
                       for key in ("clients", "shapes", "scripts")}}
    for record in records:
        for who, client in record["clients"].items():
            mine = out["clients"].setdefault(who, {"commands": {}, "subcommands": {}, "shapes": {}, "scripts": {}})
            for section in ("commands", "subcommands"):
                for name, count in client.get(section, {}).items():
                    mine[section][name] = mine[section].get(name, 0) + count
            for ident, script in client.get("scripts", {}).items():
                entry = mine["scripts"].setdefault(ident, dict(script, count=0))
                entry["count"] += script["count"]
            for shape, s in client.get("shapes", {}).items():
                entry = mine["shapes"].get(shape)
                if entry is None:
                    mine["shapes"][shape] = dict(s, commands=dict(s["commands"]))
                    continue
                for field in ("count", "ttl_writes", "plain_writes"):
                    entry[field] += s[field]
                for name, count in s["commands"].items():
                    entry["commands"][name] = entry["commands"].get(name, 0) + count
                if s["ttl_min"] is not None:
                    entry["ttl_min"] = s["ttl_min"] if entry["ttl_min"] is None else min(entry["ttl_min"], s["ttl_min"])
                    entry["ttl_max"] = s["ttl_max"] if entry["ttl_max"] is None else max(entry["ttl_max"], s["ttl_max"])
    for client in out["clients"].values():
        client["commands"] = dict(sorted(client["commands"].items(), key=lambda item: -item[1]))
    return out


def load(paths, table=None) -> Learned:
    """The record(s) of `serve --learn` (a path, or a list of them: one per worker)."""
    paths = [paths] if isinstance(paths, str) else list(paths)
    records = [_read(path) for path in paths]
    return Learned(records[0] if len(records) == 1 else merge(records), table)

