"""Shared case tables: a command line and the argument indexes Redis says are keys.

The same tables drive the offline tests (against the snapshot) and the comparison
with a real server's ``COMMAND GETKEYSANDFLAGS``. Lines are split with shlex, so
``""`` is an empty argument.
"""

import shlex

KEY_CASES: list[tuple[str, list[int]]] = [
    # strings
    ("GET k", [1]),
    ("get k", [1]),
    ("SET k v", [1]),
    ("SET k v GET", [1]),
    ("SET k v EX 10 NX GET", [1]),
    ("GETEX k EX 10", [1]),
    ("GETEX k PERSIST", [1]),
    ("GETDEL k", [1]),
    ("MSET a 1 b 2 c 3", [1, 3, 5]),
    ("MSETNX a 1 b 2", [1, 3]),
    ("MGET a b c", [1, 2, 3]),
    ("LCS a b LEN", [1, 2]),
    ("APPEND k v", [1]),
    ("INCRBY k 2", [1]),
    # generic
    ("DEL a b c", [1, 2, 3]),
    ("UNLINK a", [1]),
    ("EXISTS a b", [1, 2]),
    ("TOUCH a b", [1, 2]),
    ("RENAME a b", [1, 2]),
    ("RENAMENX a b", [1, 2]),
    ("COPY a b", [1, 2]),
    ("COPY a b DB 1 REPLACE", [1, 2]),
    ("EXPIRE k 10 NX", [1]),
    ("DUMP k", [1]),
    ("RESTORE k 0 payload REPLACE", [1]),
    ("OBJECT ENCODING k", [2]),
    ("OBJECT FREQ k", [2]),
    ("object idletime k", [2]),
    ("OBJECT HELP", []),
    ("MEMORY USAGE k SAMPLES 5", [2]),
    ("WATCH a b", [1, 2]),
    # sort: key specs 'unknown' -> the sortGetKeys fallback
    ("SORT k", [1]),
    ("SORT k ALPHA DESC", [1]),
    ("SORT k BY w_* LIMIT 0 10 GET o_* GET # ALPHA STORE d", [1, 13]),
    ("SORT k STORE a STORE b", [1, 5]),
    ("SORT k GET store", [1]),
    ("SORT k LIMIT 0 1 STORE dst", [1, 6]),
    ("SORT k STORE", [1]),
    ("sort k store d", [1, 3]),
    ("SORT_RO k BY w_* GET o_*", [1]),
    ("SORT_RO k", [1]),
    # migrate: KEYS spec INCOMPLETE -> the migrateGetKeys fallback
    ("MIGRATE h 6380 k 0 1000", [3]),
    ("MIGRATE h 6380 k 0 1000 COPY REPLACE", [3]),
    ('MIGRATE h 6380 "" 0 1000 KEYS a b c', [7, 8, 9]),
    ('MIGRATE h 6380 "" 0 1000 COPY REPLACE AUTH pw KEYS a b', [11, 12]),
    ('MIGRATE h 6380 "" 0 1000 AUTH2 keys pw KEYS a', [10]),
    ('migrate h 6380 "" 0 1000 keys k', [7]),
    ("MIGRATE h 6380 k 0 1000 KEYS a", []),  # key and KEYS: Redis replies with an error
    # lists
    ("LPUSH l a b", [1]),
    ("LMOVE s d LEFT RIGHT", [1, 2]),
    ("BLMOVE s d LEFT RIGHT 0", [1, 2]),
    ("RPOPLPUSH s d", [1, 2]),
    ("BRPOPLPUSH s d 0", [1, 2]),
    ("BLPOP a b c 0", [1, 2, 3]),
    ("BRPOP a 1.5", [1]),
    ("LMPOP 2 a b LEFT COUNT 2", [2, 3]),
    ("LMPOP 1 a RIGHT", [2]),
    ("BLMPOP 0 2 a b LEFT", [3, 4]),
    # sets
    ("SADD s m", [1]),
    ("SMOVE s d m", [1, 2]),
    ("SUNIONSTORE d a b", [1, 2, 3]),
    ("SINTERSTORE d a", [1, 2]),
    ("SDIFFSTORE d a b c", [1, 2, 3, 4]),
    ("SINTER a b", [1, 2]),
    ("SINTERCARD 2 a b LIMIT 5", [2, 3]),
    ("SINTERCARD 1 a", [2]),
    # sorted sets
    ("ZADD z 1 m", [1]),
    ("ZUNIONSTORE d 2 a b WEIGHTS 1 2", [1, 3, 4]),
    ("ZINTERSTORE d 1 a", [1, 3]),
    ("ZDIFFSTORE d 2 a b", [1, 3, 4]),
    ("ZUNION 2 a b WITHSCORES", [2, 3]),
    ("ZINTER 3 a b c AGGREGATE MAX", [2, 3, 4]),
    ("ZDIFF 2 a b", [2, 3]),
    ("ZINTERCARD 2 a b LIMIT 1", [2, 3]),
    ("ZRANGESTORE d s 0 -1", [1, 2]),
    ("ZMPOP 1 a MIN", [2]),
    ("ZMPOP 2 a b MAX COUNT 3", [2, 3]),
    ("BZMPOP 0 1 a MAX", [3]),
    ("BZPOPMIN a b 0", [1, 2]),
    # scripting: numkeys
    ("EVAL s 2 a b x y", [3, 4]),
    ("EVAL s 1 a", [3]),
    ("EVAL s 0", []),
    ("EVAL s 0 x y", []),
    ("EVALSHA 0123abcd 1 a x", [3]),
    ("EVAL_RO s 1 a", [3]),
    ("EVALSHA_RO sha 2 a b", [3, 4]),
    ("FCALL f 2 a b x", [3, 4]),
    ("FCALL_RO f 1 a", [3]),
    ("FCALL f 0", []),
    # streams
    ("XADD s * f v", [1]),
    ("XREAD COUNT 2 STREAMS a b 0 0", [4, 5]),
    ("XREAD BLOCK 0 STREAMS a $", [4]),
    ("XREAD STREAMS streams streams 0 0", [2, 3]),
    ("xread streams a 0", [2]),
    ("XREADGROUP GROUP g c COUNT 1 STREAMS a b > >", [7, 8]),
    ("XREADGROUP GROUP g streams STREAMS a >", [5]),
    ("XREADGROUP GROUP streams c NOACK STREAMS a b c > > >", [6, 7, 8]),
    ("XGROUP CREATE k g $ MKSTREAM", [2]),
    ("XGROUP CREATECONSUMER k g c", [2]),
    ("XGROUP DESTROY k g", [2]),
    ("XINFO STREAM k FULL", [2]),
    ("XCLAIM k g c 0 1-1", [1]),
    # geo
    ("GEOADD g 0 0 m", [1]),
    ("GEORADIUS k 0 0 1 km", [1]),
    ("GEORADIUS k 0 0 1 km WITHDIST", [1]),
    ("GEORADIUS k 0 0 1 km STORE d", [1, 7]),
    ("GEORADIUS k 0 0 1 km STOREDIST d", [1, 7]),
    ("GEORADIUS k 0 0 1 km COUNT 3 STORE a STOREDIST b", [1, 9, 11]),
    ("GEORADIUSBYMEMBER k m 1 km STORE d", [1, 6]),
    ("GEORADIUSBYMEMBER k m 1 km storedist d", [1, 6]),
    ("GEORADIUS_RO k 0 0 1 km", [1]),
    ("GEOSEARCHSTORE d s FROMMEMBER m BYRADIUS 1 km", [1, 2]),
    # hyperloglog, bitmaps
    ("PFADD h a b", [1]),
    ("PFMERGE d a b", [1, 2, 3]),
    ("PFMERGE d a", [1, 2]),
    ("PFCOUNT a b", [1, 2]),
    ("BITOP AND d a b", [2, 3, 4]),
    ("BITOP NOT d a", [2, 3]),
    ("BITCOUNT k 0 1", [1]),
    ("BITFIELD k GET u8 0", [1]),
    ("BITFIELD k SET u8 0 1 GET u8 0", [1]),
    ("BITFIELD_RO k GET u8 0", [1]),
    # hashes
    ("HSET h f v f2 v2", [1]),
    ("HGETALL h", [1]),
]

# Commands without keys (the proxy still sees them).
NO_KEY_CASES: list[str] = [
    "PING",
    "CLIENT SETNAME x",
    "CLIENT LIST",
    "CONFIG SET maxmemory 1",
    "CONFIG GET *",
    "MULTI",
    "EXEC",
    "SUBSCRIBE c",
    "PUBLISH c m",
    "INFO server",
    "FLUSHALL",
    "KEYS *",
    "SCAN 0",
    "SCRIPT LOAD x",
    "FUNCTION LIST",
]

# Arguments Redis itself will reject: no keys, the proxy lets Redis answer.
INVALID_CASES: list[str] = [
    "GET",
    "EVAL s x a",  # numkeys not a number
    "EVAL s 3 a b",  # more keys than arguments
    "EVAL s -1 a",
    "ZUNIONSTORE d 0 a",  # zero keys
    "ZUNIONSTORE d x a",
    "ZUNION 5 a b",
    "SINTERCARD 0 a",
    "LMPOP 3 a LEFT",
    "BLMPOP 0 x a LEFT",
    "FCALL f 2 a",
]

# Where we knowingly differ from Redis 7.0's COMMAND GETKEYS: (line, our keys, why).
GETKEYS_DIVERGES: list[tuple[str, list[int], str]] = [
    # GETKEYS falls back to a lenient atoi() and names a key; the command itself reads
    # numkeys with string2ll and fails. We follow the command.
    ("EVAL s 01 a", [], "numkeys with a leading zero"),
    ("EVAL s 1x a", [], "numkeys with trailing junk"),
    ("EVAL s +1 a", [], "numkeys with a plus sign"),
    # The command runs and writes dest; GETKEYS calls the empty source range invalid.
    ("PFMERGE dest", [1], "an empty range of optional keys"),
]


def split(line: str) -> list[bytes]:
    return [part.encode() for part in shlex.split(line)]


def as_bytes(value):
    """A snapshot's JSON strings back as the bytes hiredis gives for a live reply."""
    if isinstance(value, str):
        return value.encode()
    if isinstance(value, list):
        return [as_bytes(v) for v in value]
    return value
