"""Redis 8's HSETEX and VADD read as Redis reads them: which arguments are the fields, values,
elements and attributes written, or None for arguments Redis refuses (it then writes nothing).
V2 counts the fields and elements, V3 measures the values, elements and attributes, T3 reads
HSETEX's field TTL. Sans-IO.
"""

from __future__ import annotations

HSETEX_FLAGS = frozenset({b"fnx", b"fxx", b"keepttl"})
HSETEX_TTLS = frozenset({b"ex", b"px", b"exat", b"pxat"})
VADD_FLAGS = frozenset({b"cas", b"noquant", b"q8", b"bin"})
VADD_VALUED = frozenset({b"ef", b"m", b"setattr"})


def hsetex_fields(args):
    """(flags, [field, value, ...]) of HSETEX key [FNX|FXX] [EX s|PX ms|EXAT t|PXAT t|KEEPTTL]
    FIELDS numfields field value ... (the FIELDS block ends the command, as Redis requires),
    or None when Redis will refuse the arguments."""
    i, count = 2, len(args)
    flags = set()
    while i < count:
        word = args[i].lower()
        if word == b"fields":
            try:
                n = int(args[i + 1]) if i + 1 < count else -1
            except ValueError:
                return None
            if n < 1 or count != i + 2 + 2 * n:
                return None
            return flags, args[i + 2:]
        if word in HSETEX_FLAGS:
            flags.add(word)
            i += 1
        elif word in HSETEX_TTLS:
            flags.add(word)
            i += 2
        else:
            return None
    return None


def hsetex_ttl_index(args) -> int | None:
    """The argument index of HSETEX's field TTL (after EX/PX/EXAT/PXAT), None without one."""
    i = 2
    while i + 1 < len(args):
        word = args[i].lower()
        if word == b"fields":
            return None
        if word in HSETEX_TTLS:
            return i + 1
        i += 1
    return None


def vadd_parts(args):
    """(element, [attribute, ...]) of VADD key [REDUCE dim] (FP32 blob | VALUES num v ...) element
    [CAS] [NOQUANT|Q8|BIN] [EF n] [SETATTR json] [M n], or None when Redis will refuse the arguments."""
    i, count = 2, len(args)
    if i < count and args[i].lower() == b"reduce":
        i += 2
    if i >= count:
        return None
    shape = args[i].lower()
    if shape == b"fp32":
        i += 2
    elif shape == b"values":
        try:
            n = int(args[i + 1]) if i + 1 < count else -1
        except ValueError:
            return None
        if n < 1:
            return None
        i += 2 + n
    else:
        return None
    if i >= count:
        return None
    element, attributes = args[i], []
    i += 1
    while i < count:
        word = args[i].lower()
        if word in VADD_FLAGS:
            i += 1
        elif word in VADD_VALUED and i + 1 < count:
            if word == b"setattr":
                attributes.append(args[i + 1])
            i += 2
        else:
            return None
    return element, attributes


def vadd_dimension(args):
    """(dimension, how it was given) of the vector VADD writes, before any REDUCE: VALUES' count,
    or an FP32 blob's length / 4 (Redis refuses a length that is not a multiple of 4, and a count
    that is not an integer of at least 1: None then, as for arguments without a vector)."""
    i, count = 2, len(args)
    if i < count and args[i].lower() == b"reduce":
        i += 2
    if i + 1 >= count:
        return None
    shape = args[i].lower()
    if shape == b"fp32":
        size = len(args[i + 1])
        return (size // 4, f"an FP32 blob of {size} bytes") if size >= 4 and size % 4 == 0 else None
    if shape == b"values":
        try:
            n = int(args[i + 1])
        except ValueError:
            return None
        return (n, f"VALUES {n}") if n >= 1 else None
    return None


def vadd_element(args):
    """VADD's element and attributes as one list (V3), or None."""
    parsed = vadd_parts(args)
    return None if parsed is None else [parsed[0], *parsed[1]]


XADD_FLAGS = frozenset({b"nomkstream", b"keepref", b"delref", b"acked"})  # the last three: Redis 8.2


def xadd_options(args):
    """(flags, exact MAXLEN threshold or None, index of the entry id) of XADD key [NOMKSTREAM]
    [KEEPREF|DELREF|ACKED] [MAXLEN|MINID [=|~] threshold [LIMIT count]] id field value ...: the
    options in any order, as Redis reads them (7.0 too: `MAXLEN 10 NOMKSTREAM` is valid)."""
    i, count = 2, len(args)
    flags = set()
    exact = None
    while i < count:
        word = args[i].lower()
        if word in XADD_FLAGS:
            flags.add(word)
            i += 1
        elif word in (b"maxlen", b"minid"):
            approximate = i + 1 < count and args[i + 1] == b"~"
            i += 2 if i + 1 < count and args[i + 1] in (b"=", b"~") else 1
            if word == b"maxlen" and not approximate and i < count:
                exact = args[i]
            i += 1
        elif word == b"limit":
            i += 2
        else:
            break
    return flags, exact, i
