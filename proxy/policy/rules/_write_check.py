"""Writes whose value only the server knows, checked there atomically (K6, V1, V2 share it).

The arguments of `COPY a b` do not say what `a` holds; nor do those of `SUNIONSTORE d a b` say how
big the union is, nor those of `RESTORE k 0 <payload>` (LZF-compressed listpacks) or `PFADD h x`
(a HyperLogLog turns from 200 bytes sparse into 12 KB dense) what the key will hold. Such a write
is sent as one `EVAL` of `SCRIPT`, in one of three ways (`WRITES`, the one table of them):

* `source`: the written key gets the value of existing keys (COPY, RENAME, RENAMENX: the source;
  BITOP: as long as its longest source). The sources are measured (TYPE, then STRLEN, HLEN, LLEN,
  SCARD, ZCARD or XLEN) before the write;
* `count`: the written key gets what a read returns (SUNIONSTORE: SUNION, SINTERSTORE:
  SINTERCARD, ZUNIONSTORE: ZUNION, ZRANGESTORE: ZRANGE, GEOSEARCHSTORE: GEOSEARCH, GEORADIUS ...
  STORE: GEORADIUS_RO, SORT ... STORE: SORT_RO). The read runs first and its reply is counted;
  when Redis's ACL refuses the read, nothing is written;
* `after`: the write runs (RESTORE, PFADD, PFMERGE), the key is measured, and a write that breaks
  a rule is undone: the key's previous value, kept before the write (DUMP and PTTL for RESTORE ...
  REPLACE, GET for a HyperLogLog), is put back, or the key deleted when it had none.

Each rule adds its part to the one `CheckedWrite` of the call (`checked_write`): K6 the types the
written key's type word allows, V1 the string limit, V2 the collection caps; the script answers
the first refusal as `-NOPERM ... rule <id> ...` and otherwise returns the write's own reply
(`redis.pcall`, in the client's protocol). Everything the script calls is named in
`SCRIPT_COMMANDS`, for the ACL users (`policy/acl.py`). Sans-IO.
"""

from __future__ import annotations

from ...errors import violation_text
from ..base import same_command

TYPES = ("string", "hash", "list", "set", "zset", "stream")
SCRIPT_COMMANDS = frozenset({
    "eval", "type", "strlen", "hlen", "llen", "scard", "zcard", "xlen", "dump", "pttl", "get", "set", "del",
    "sunion", "sdiff", "sintercard", "zunion", "zdiff", "zintercard", "zrange", "geosearch", "georadius_ro",
    "georadiusbymember_ro", "sort_ro",
})

SCRIPT = b"""\
-- Redis Guard K6/V1/V2: a write whose value only the server knows, checked atomically.
-- KEYS[1] the key written, KEYS[2..1+m] the keys measured before it (how 'source'), then the rest.
-- ARGV: protocol, how, undo, type written, types allowed, their refusal, limits and refusals of
-- string hash list set zset stream, m, n, the read of n arguments (how 'count'), the command.
local target, how, undo = KEYS[1], ARGV[2], ARGV[3]
local at = {string = 7, hash = 8, list = 9, set = 10, zset = 11, stream = 12}
local sizes = {string = 'STRLEN', hash = 'HLEN', list = 'LLEN', set = 'SCARD', zset = 'ZCARD', stream = 'XLEN'}
local function measure(key)
  local t = redis.call('TYPE', key)['ok']
  if sizes[t] then return t, redis.call(sizes[t], key) end
  return t, 0
end
local function refusal(t, n)
  if t == 'none' then return nil end
  if ARGV[5] ~= '' and not string.find(' ' .. ARGV[5] .. ' ', ' ' .. t .. ' ', 1, true) then
    return string.format('%s (it holds a %s)', ARGV[6], t)
  end
  local i = at[t]
  if i and tonumber(ARGV[i]) >= 0 and n > tonumber(ARGV[i]) then
    return string.format('%s (it would hold %d)', ARGV[i + 6], n)
  end
  return nil
end
local m, n = tonumber(ARGV[19]), tonumber(ARGV[20])
local command = {}
for i = 21 + n, #ARGV do command[#command + 1] = ARGV[i] end
local old = false
local ttl = -1
if how == 'source' then
  local kind, most = 'none', 0
  for i = 2, 1 + m do
    local t, size = measure(KEYS[i])
    if t ~= 'none' and (ARGV[4] == '' or t == ARGV[4]) then  -- BITOP of a hash: Redis's WRONGTYPE
      kind = t
      if size > most then most = size end
    end
  end
  local refused = refusal(kind, most)
  if refused then return redis.error_reply(refused) end
elseif how == 'count' then
  local read = {}
  for i = 21, 20 + n do read[#read + 1] = ARGV[i] end
  local reply = redis.pcall(unpack(read))
  if type(reply) == 'table' and reply.err then
    if string.sub(reply.err, 1, 6) == 'NOPERM' then return reply end
  else
    local refused = refusal(ARGV[4], type(reply) == 'number' and reply or #reply)
    if refused then return redis.error_reply(refused) end
  end
elseif undo == 'dump' then
  old = redis.call('DUMP', target)
  ttl = redis.call('PTTL', target)
elseif undo == 'value' then
  local value = redis.pcall('GET', target)
  if type(value) == 'string' then old = value end
end
if ARGV[1] == '3' then redis.setresp(3) end
local reply = redis.pcall(unpack(command))
if how ~= 'after' or (type(reply) == 'table' and reply.err) then return reply end
local refused = refusal(measure(target))
if refused then
  if undo == 'value' and old then
    redis.call('SET', target, old, 'KEEPTTL')
  else
    redis.call('DEL', target)
    if old then redis.call('RESTORE', target, ttl > 0 and ttl or 0, old) end
  end
  return redis.error_reply(refused)
end
return reply
"""


def _rest(args, first):
    return list(range(first, len(args)))


def _option_index(args, start, words):
    """Index of the last of these option words (and its argument) from `start`, else None."""
    found = None
    for i in range(start, len(args) - 1):
        if args[i].lower() in words:
            found = i
    return found


def _without(args, start, words):
    """args[start:] without the option words named (and the argument each takes)."""
    out, i = [], start
    while i < len(args):
        if args[i].lower() in words and i + 1 < len(args):
            i += 2
            continue
        out.append(args[i])
        i += 1
    return out


def _numkeys(args, at):
    """The keys of `... numkeys key...` at `at`, or None when numkeys is not a fitting count."""
    try:
        count = int(args[at])
    except (IndexError, ValueError):
        return None
    return args[at + 1:at + 1 + count] if 0 < count <= len(args) - at - 1 else None


STORE_WORDS = (b"store", b"storedist")


def _copy(args):  # COPY src dst [DB db] [REPLACE]; RENAME/RENAMENX src dst
    return ("source", 2, [1], None, "", "") if len(args) >= 3 else None


def _bitop(args):  # BITOP op dest src...
    return ("source", 2, _rest(args, 3), None, "", "string") if len(args) >= 4 else None


def _restore(args):  # RESTORE key ttl payload [REPLACE] [ABSTTL] [IDLETIME s] [FREQ f]
    if len(args) < 4:
        return None
    replace = any(arg.lower() == b"replace" for arg in args[4:])
    return ("after", 1, [], None, "dump" if replace else "del", "")


def _hll(args):  # PFADD key [element...]; PFMERGE dest [src...]
    return ("after", 1, [], None, "value", "") if len(args) >= 2 else None


def _read(name, drop_target=True, kind="", numkeys_read=None):
    """`name` reads what the write stores: its arguments are the write's without the target."""
    def build(args):
        if len(args) < 3:
            return None
        if numkeys_read is not None:  # ZINTERCARD / ZDIFF take numkeys and the keys only
            keys = _numkeys(args, 2)
            return None if keys is None else ("count", 1, [], [numkeys_read, args[2], *keys], "", kind)
        return ("count", 1, [], [name, *args[2:]], "", kind)
    return build


def _georadius(name, fixed):
    """GEORADIUS key lon lat radius unit ... STORE k | STOREDIST k: the _RO form, without them."""
    def build(args):
        at = _option_index(args, fixed, STORE_WORDS)
        if at is None:
            return None  # no STORE: a read
        return ("count", at + 1, [], [name, *args[1:fixed], *_without(args, fixed, STORE_WORDS)], "", "zset")
    return build


def _geosearchstore(args):  # GEOSEARCHSTORE dst src ... [STOREDIST]
    if len(args) < 3:
        return None
    return ("count", 1, [], [b"GEOSEARCH", *(a for a in args[2:] if a.lower() != b"storedist")], "", "zset")


def _sort(args):  # SORT key [BY p] [LIMIT o c] [GET p]... [ASC|DESC] [ALPHA] [STORE dst]
    i, store, rest = 2, None, []
    while i < len(args):
        word = args[i].lower()
        width = 3 if word == b"limit" else 2 if word in (b"by", b"get", b"store") else 1
        if word == b"store" and i + 1 < len(args):
            store = i + 1
        else:
            rest += args[i:i + width]
        i += width
    if store is None:
        return None
    return ("count", store, [], [b"SORT_RO", args[1], *rest], "", "list")


# command -> args -> (how, index of the key written, indexes of the keys measured (source),
# the read whose reply is counted (count), undo (after), the type written when known)
WRITES = {
    "copy": _copy, "rename": _copy, "renamenx": _copy,
    "bitop": _bitop,
    "restore": _restore, "restore-asking": _restore,
    "pfadd": _hll, "pfmerge": _hll,
    "sunionstore": _read(b"SUNION", kind="set"),
    "sdiffstore": _read(b"SDIFF", kind="set"),
    "sinterstore": lambda args: ("count", 1, [], [b"SINTERCARD", str(len(args) - 2).encode(), *args[2:]], "",
                                 "set") if len(args) >= 3 else None,
    "zunionstore": _read(b"ZUNION", kind="zset"),
    "zinterstore": _read(None, kind="zset", numkeys_read=b"ZINTERCARD"),
    "zdiffstore": _read(None, kind="zset", numkeys_read=b"ZDIFF"),
    "zrangestore": _read(b"ZRANGE", kind="zset"),
    "geosearchstore": _geosearchstore,
    "georadius": _georadius(b"GEORADIUS_RO", 6),
    "georadiusbymember": _georadius(b"GEORADIUSBYMEMBER_RO", 5),
    "sort": _sort,
}


class CheckedWrite(list):
    """The EVAL sent instead of a write (a list of arguments like any command), with what the
    rules have asked of it so far; `render` rewrites the arguments after each change."""

    def __init__(self, name: str, command, plan, protocol: int, key_indexes=()):
        super().__init__()
        self.name = name
        self.command = list(command)
        self.how, self.target, self.sources, self.read, self.undo, self.kind = plan
        self.protocol = protocol
        self.key_indexes = tuple(key_indexes)  # every key of the command: the EVAL declares them all
        self.types: tuple[str, ...] = ()  # the types the written key may hold ('' any)
        self.type_refusal = b""
        self.limits = {kind: (-1, b"") for kind in TYPES}

    def allow_types(self, types, finding) -> None:
        self.types = tuple(types)
        self.type_refusal = _text(finding)
        self.render()

    def limit(self, kind: str, limit: int, finding) -> None:
        self.limits[kind] = (limit, _text(finding))
        self.render()

    def target_key(self) -> bytes:
        return self.command[self.target]

    def render(self) -> None:
        command = self.command
        measured = [command[i] for i in self.sources]
        named = {self.target, *self.sources}
        keys = [command[self.target], *measured, *(command[i] for i in self.key_indexes if i not in named)]
        read = self.read or []
        self[:] = [b"EVAL", SCRIPT, str(len(keys)).encode(), *keys,
                   b"3" if self.protocol == 3 else b"2", self.how.encode(), self.undo.encode(), self.kind.encode(),
                   " ".join(self.types).encode(), self.type_refusal,
                   *(str(self.limits[kind][0]).encode() for kind in TYPES),
                   *(self.limits[kind][1] for kind in TYPES),
                   str(len(measured)).encode(), str(len(read)).encode(), *read, *command]


def checked_write(call):
    """The CheckedWrite of this call in the rewrite chain (made by an earlier rule), a new one,
    or None when the command is not in `WRITES` or Redis will refuse its arguments."""
    commands = call.commands or [call.args]
    first = commands[0]
    if isinstance(first, CheckedWrite) and first.name == call.name:
        return first
    if not same_command(call, first):
        return None  # an earlier rule sends something else
    build = WRITES.get(call.name)
    plan = build(first) if build is not None else None
    if plan is None:
        return None
    return CheckedWrite(call.name, first, plan, getattr(call.state, "protocol", 2),
                        [index for index, _ in (call.keys or ())])


def with_check(call, check):
    """The commands to send once `check` replaces the write (the chain's later commands kept)."""
    commands = call.commands or [call.args]
    return [check, *commands[1:]]


def _text(finding) -> bytes:
    return violation_text(finding).replace("\r", " ").replace("\n", " ").encode("utf-8", "replace")


# RESTORE's payload starts with the RDB type of its value (src/rdb.h, Redis 7.0-7.2).
RDB_TYPES = {0: "string", 1: "list", 10: "list", 14: "list", 18: "list", 2: "set", 11: "set", 20: "set",
             3: "zset", 5: "zset", 12: "zset", 17: "zset", 4: "hash", 9: "hash", 13: "hash", 16: "hash",
             15: "stream", 19: "stream", 21: "stream"}
RESTORES = frozenset({"restore", "restore-asking"})


def payload_type(payload: bytes) -> str | None:
    """The value type a DUMP payload holds (TYPE's word), or None (a module's, or not a payload:
    Redis refuses it)."""
    return RDB_TYPES.get(payload[0]) if payload else None
