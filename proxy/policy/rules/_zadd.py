"""ZADD's and GEOADD's arguments read as Redis reads them (`zadd_members`): the flags and the
members written, or None for arguments Redis refuses. V2 counts the members, V3 measures them.
"""

ZADD_FLAGS = frozenset({b"nx", b"xx", b"gt", b"lt", b"ch", b"incr"})
GEOADD_FLAGS = frozenset({b"nx", b"xx", b"ch"})


def zadd_members(args, geo: bool = False):
    """(flags, members) of ZADD key [NX|XX] [GT|LT] [CH] [INCR] score member ... (GEOADD:
    [NX|XX] [CH] lon lat member ...), or None when Redis will refuse the arguments."""
    words = GEOADD_FLAGS if geo else ZADD_FLAGS
    i = 2
    flags = set()
    while i < len(args) and args[i].lower() in words:
        flags.add(args[i].lower())
        i += 1
    step = 3 if geo else 2
    rest = len(args) - i
    if rest < step or rest % step:
        return None
    if b"nx" in flags and (b"xx" in flags or b"gt" in flags or b"lt" in flags):
        return None
    if (b"gt" in flags and b"lt" in flags) or (b"incr" in flags and rest != step):
        return None
    return flags, args[i + step - 1::step]
