"""The command table: what Redis itself says about every command.

Theory of operation
-------------------
Everything here is built from two replies of the upstream server, ``COMMAND INFO``
and ``COMMAND DOCS`` (RESP2, as ``hiredis.Reader`` parses them: bytes, ints, lists;
the DOCS maps arrive as flat key/value lists), or from a JSON snapshot of those two
replies (``data/redis-7.0.json``, written by ``snapshot.py``) when the upstream
cannot be asked. ``data/redis-8.2.json`` is Redis 8.2's (hash-field TTLs, vector sets,
XDELEX...): ``snapshot_for(version)`` picks the one covering an upstream whose version is
known but whose COMMAND is refused, and the policy's completeness tests walk both. No command is
described by hand in this module.

* ``CommandSpec`` is one command (or one subcommand, named ``container|sub``):
  arity, flags, ACL categories, group (a module's commands: the module's name, e.g.
  ``vectorset`` for Redis 8's VADD...) and key specs, normalised once:
  command flags and ACL categories lower case (categories without ``@``), key-spec
  flags upper case (``RW``, ``ACCESS``, ...), as Redis's JSON files spell them.
* ``KeySpec`` is a key spec exactly as Redis describes it: a ``BeginSearch``
  (``index`` / ``keyword`` / ``unknown``) and a ``FindKeys`` (``range`` / ``keynum`` /
  ``unknown``). ``keyspecs.find_keys`` interprets it.
* ``CommandTable.lookup`` is on the hot path (once per proxied command). It is one
  dict lookup on the exact bytes of ``args[0]`` (the index holds the lower- and
  upper-case spelling of every name), a ``.lower()`` only for mixed case, and the
  same again on ``args[1]`` for container commands (CLIENT, CONFIG, OBJECT, ...).

Replies from servers older than 7.0 (no key specs, no subcommands, no DOCS) are
accepted: the legacy first/last/step triple becomes a single range key spec,
marked ``INCOMPLETE`` when the command has ``movablekeys``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any

from .. import errors
from .keyspecs import BeginSearch, FindKeys, KeySpec, find_keys

__all__ = [
    "DEFAULT_SNAPSHOT",
    "BeginSearch",
    "CommandSpec",
    "CommandTable",
    "FindKeys",
    "KeySpec",
    "SNAPSHOTS",
    "snapshot_for",
]

DEFAULT_SNAPSHOT = Path(__file__).with_name("data") / "redis-7.0.json"
# (major, minor) -> the snapshot of that Redis release, oldest first.
SNAPSHOTS = {(7, 0): DEFAULT_SNAPSHOT, (8, 2): DEFAULT_SNAPSHOT.with_name("redis-8.2.json")}


def snapshot_for(version: str | None) -> Path:
    """The snapshot for a server of this version ("8.0.2"): that of the first release at or after
    it, which knows every command the server has (a command the server lacks, it refuses itself;
    one the table lacked would pass unchecked by the policy), the newest for a newer server; the
    default one when the version is unknown or unreadable."""
    try:
        wanted = tuple(int(part) for part in (version or "").split(".")[:2])
    except ValueError:
        return DEFAULT_SNAPSHOT
    if len(wanted) != 2:
        return DEFAULT_SNAPSHOT
    covering = [release for release in SNAPSHOTS if release >= wanted]
    return SNAPSHOTS[min(covering) if covering else max(SNAPSHOTS)]

_EMPTY: Mapping[str, CommandSpec] = MappingProxyType({})


@dataclass(frozen=True, slots=True)
class CommandSpec:
    name: str  # lower case; subcommands as 'client|setname'
    arity: int
    flags: frozenset[str]  # lower case: write, readonly, denyoom, blocking, movablekeys, ...
    acl_categories: frozenset[str]  # lower case, without '@'
    group: str | None  # from COMMAND DOCS
    key_specs: tuple[KeySpec, ...] = ()
    subcommands: Mapping[str, CommandSpec] = field(default_factory=lambda: _EMPTY, compare=False)
    # COMMAND INFO's tips (7.0+): request_policy:all_shards, response_policy:agg_sum...
    tips: frozenset[str] = field(default=frozenset(), compare=False)
    # Like Redis's doesCommandHaveKeys(): a key spec that is not NOT_KEY.
    has_keys: bool = field(init=False)
    # The common shape "one key, and it is argument 1" (GET, SET, HSET...): no interpreter needed.
    key_at_first_argument: bool = field(init=False)

    def __post_init__(self) -> None:
        specs = self.key_specs
        object.__setattr__(self, "has_keys", any("NOT_KEY" not in ks.flags for ks in specs))
        object.__setattr__(self, "key_at_first_argument", (
            len(specs) == 1 and specs[0].begin_search.kind == "index" and specs[0].begin_search.pos == 1
            and specs[0].find_keys.kind == "range" and specs[0].find_keys.lastkey == 0
            and not self.subcommands))

    @property
    def container(self) -> str | None:
        """'client' for 'client|setname', None for a top-level command."""
        head, sep, _ = self.name.partition("|")
        return head if sep else None


# Hot-path index entry: the spec and, for a container, its subcommand index.
_Entry = tuple[CommandSpec, "dict[bytes, CommandSpec] | None"]


class CommandTable:
    __slots__ = ("_commands", "_by_name", "_index", "redis_version", "from_server")

    def __init__(self, commands: Iterable[CommandSpec], redis_version: str | None = None) -> None:
        self.redis_version = redis_version
        # True when built from the upstream's own replies: then a command it does not list is
        # one the server does not know either (it answers an error), not one the snapshot lacks.
        self.from_server = False
        self._commands: dict[str, CommandSpec] = {c.name: c for c in sorted(commands, key=lambda c: c.name)}
        self._by_name: dict[str, CommandSpec] = {}
        self._index: dict[bytes, _Entry] = {}
        for spec in self._commands.values():
            self._by_name[spec.name] = spec
            subindex = None
            if spec.subcommands:
                subindex = {}
                for short, sub in spec.subcommands.items():
                    self._by_name[sub.name] = sub
                    _index_name(subindex, short, sub)
            _index_name(self._index, spec.name, (spec, subindex))

    # -- construction -------------------------------------------------------------

    @classmethod
    def from_replies(cls, info_reply: Sequence[Any], docs_reply: Any = None,
                     redis_version: str | None = None) -> CommandTable:
        """Build from ``COMMAND INFO`` and ``COMMAND DOCS`` replies.

        Strings may be bytes (straight from hiredis) or str (from the JSON snapshot).
        ``docs_reply`` may be None or an error (servers before 7.0): groups are then None.
        """
        docs = _pairs(docs_reply) if isinstance(docs_reply, (list, tuple, dict)) else {}
        commands = [_command(entry, docs) for entry in info_reply if isinstance(entry, (list, tuple))]
        return cls(commands, redis_version)

    @classmethod
    def from_snapshot(cls, path: str | Path | None = None) -> CommandTable:
        with open(path or DEFAULT_SNAPSHOT, encoding="utf-8") as f:
            data = json.load(f)
        return cls.from_replies(data["command_info"], data.get("command_docs"), data.get("redis_version"))

    # -- the hot path -------------------------------------------------------------

    def lookup(self, args: Sequence[bytes]) -> CommandSpec | None:
        """The spec of the command in ``args`` (subcommand resolved), or None if unknown."""
        if not args:
            return None
        name = args[0]
        entry = self._index.get(name)
        if entry is None:
            entry = self._index.get(name.lower())
            if entry is None:
                return None
        spec, subindex = entry
        if subindex is None or len(args) < 2:
            return spec
        sub = args[1]
        found = subindex.get(sub)
        if found is None:
            found = subindex.get(sub.lower())
            if found is None:
                return spec
        return found

    def refusal(self, args: Sequence[bytes]) -> bytes | None:
        """Redis's reply when it refuses `args` before running or queueing it (unknown command,
        unknown subcommand, wrong number of arguments), or None."""
        spec = self.lookup(args)
        if spec is None:
            return errors.unknown_command(args)
        if spec.subcommands and len(args) > 1:
            return errors.unknown_subcommand(args)
        arity = spec.arity
        if (arity > 0 and len(args) != arity) or (arity < 0 and len(args) < -arity):
            return errors.wrong_arity(spec.name)
        return None

    def key_positions(self, args: Sequence[bytes]) -> list[tuple[int, KeySpec]]:
        """Argument index of every key in ``args``, with the key spec that applies."""
        spec = self.lookup(args)
        if spec is None or not spec.key_specs:
            return []
        return find_keys(spec, args)

    # -- conveniences -------------------------------------------------------------

    def get(self, name: str) -> CommandSpec | None:
        """By full name, case-insensitive: 'get', 'CLIENT|SETNAME'."""
        return self._by_name.get(name.lower())

    def __getitem__(self, name: str) -> CommandSpec:
        spec = self.get(name)
        if spec is None:
            raise KeyError(name)
        return spec

    def __contains__(self, name: object) -> bool:
        if isinstance(name, bytes):
            name = name.decode("utf-8", "replace")
        return isinstance(name, str) and name.lower() in self._by_name

    def __len__(self) -> int:
        """Number of top-level commands."""
        return len(self._commands)

    def __iter__(self) -> Iterator[CommandSpec]:
        """Top-level commands, by name."""
        return iter(self._commands.values())

    def walk(self) -> Iterator[CommandSpec]:
        """Every command and subcommand, by name (a container before its subcommands)."""
        for spec in self._commands.values():
            yield spec
            yield from spec.subcommands.values()

    def __repr__(self) -> str:
        return f"<CommandTable {len(self)} commands, redis {self.redis_version}>"


def _index_name(index: dict, name: str, value: Any) -> None:
    for form in (name, name.lower(), name.upper()):
        index[form.encode()] = value


# -- parsing the replies ----------------------------------------------------------


def _text(value: Any) -> str:
    return value.decode("utf-8") if isinstance(value, (bytes, bytearray)) else str(value)


def _pairs(value: Any) -> dict[str, Any]:
    """A RESP2 flat key/value list (or a RESP3 map) as a dict with str keys."""
    if isinstance(value, dict):
        return {_text(k): v for k, v in value.items()}
    return {_text(value[i]): value[i + 1] for i in range(0, len(value) - 1, 2)}


def _command(entry: Sequence[Any], docs: Mapping[str, Any]) -> CommandSpec:
    # [name, arity, flags, first, last, step, acl (6.0+), tips, key specs, subcommands (7.0+)]
    spelled = _text(entry[0])
    name = spelled.lower()
    flags = frozenset(_text(f).lower() for f in entry[2])
    acl = frozenset(_text(c).lower().lstrip("@") for c in entry[6]) if len(entry) > 6 else frozenset()
    raw_doc = docs.get(name, docs.get(spelled))  # a module's commands are named in upper case (VADD)
    doc = _pairs(raw_doc) if raw_doc is not None else {}
    group = _text(doc["group"]) if "group" in doc else None
    if group == "module" and "module" in doc:
        # A module's commands: the module's name stands for the group ("vectorset", which is
        # also what TYPE answers for its keys in Redis 8).
        group = _text(doc["module"])
    if len(entry) > 8:
        key_specs = tuple(_key_spec(ks) for ks in entry[8])
    else:
        key_specs = _legacy_key_specs(int(entry[3]), int(entry[4]), int(entry[5]), flags)
    subcommands: Mapping[str, CommandSpec] = _EMPTY
    if len(entry) > 9 and entry[9]:
        subdocs = _pairs(doc["subcommands"]) if "subcommands" in doc else {}
        subs = sorted((_command(sub, subdocs) for sub in entry[9]), key=lambda s: s.name)
        subcommands = MappingProxyType({s.name.partition("|")[2]: _inherit_group(s, group) for s in subs})
    tips = frozenset(_text(tip).lower() for tip in entry[7]) if len(entry) > 7 and entry[7] else frozenset()
    return CommandSpec(name, int(entry[1]), flags, acl, group, key_specs, subcommands, tips)


def _inherit_group(sub: CommandSpec, group: str | None) -> CommandSpec:
    if sub.group is not None or group is None:
        return sub
    return CommandSpec(sub.name, sub.arity, sub.flags, sub.acl_categories, group,
                       sub.key_specs, sub.subcommands, sub.tips)


def _key_spec(raw: Any) -> KeySpec:
    d = _pairs(raw)
    bs = _pairs(d["begin_search"])
    fk = _pairs(d["find_keys"])
    bs_kind, fk_kind = _text(bs["type"]), _text(fk["type"])
    bs_spec = _pairs(bs["spec"]) if bs.get("spec") else {}
    fk_spec = _pairs(fk["spec"]) if fk.get("spec") else {}
    if bs_kind == "index":
        begin = BeginSearch("index", pos=int(bs_spec["index"]))
    elif bs_kind == "keyword":
        begin = BeginSearch("keyword", keyword=_text(bs_spec["keyword"]), startfrom=int(bs_spec["startfrom"]))
    else:
        begin = BeginSearch("unknown")
    if fk_kind == "range":
        find = FindKeys("range", lastkey=int(fk_spec["lastkey"]), keystep=int(fk_spec["keystep"]),
                        limit=int(fk_spec["limit"]))
    elif fk_kind == "keynum":
        find = FindKeys("keynum", keynumidx=int(fk_spec["keynumidx"]), firstkey=int(fk_spec["firstkey"]),
                        keystep=int(fk_spec["keystep"]))
    else:
        find = FindKeys("unknown")
    flags = frozenset(_text(f).upper() for f in d.get("flags", ()))
    return KeySpec(begin, find, flags, _text(d["notes"]) if "notes" in d else "")


def _legacy_key_specs(first: int, last: int, step: int, flags: frozenset[str]) -> tuple[KeySpec, ...]:
    """The single range spec a pre-7.0 server implies with first/last/step."""
    if first <= 0:
        return ()
    lastkey = last - first if last >= 0 else last
    ks_flags = frozenset({"INCOMPLETE"}) if "movablekeys" in flags else frozenset()
    return (KeySpec(BeginSearch("index", pos=first), FindKeys("range", lastkey=lastkey, keystep=step or 1),
                    ks_flags, "legacy first/last/step"),)
