"""V3: single elements bounded: hash field values, list items, set and sorted-set members.

A CommandRule; the arguments alone decide. `ELEMENTS` is the one table of which arguments are
elements written (field names, scores and moves of existing elements are not). Streams and
HyperLogLogs are not checked. Redis 8's HSETEX (its field values) and vector sets (VADD's element
and SETATTR attributes, VSETATTR's attributes) are, and so is the dimension of the vector VADD adds
(`max_vector_dimensions`: VALUES' count, or an FP32 blob's length / 4, as given before REDUCE):
a vector set's memory and every VSIM's cost grow with it.
"""

from __future__ import annotations

from ..base import NO_ARGUMENTS, CommandRule, register
from ._fields import hsetex_fields, vadd_dimension, vadd_element
from ._keyshape import text
from ._zadd import zadd_members


def _from(first, step=1):
    return lambda args: args[first::step]


def _at(position):
    return lambda args: args[position:position + 1]


def _zadd(args):
    parsed = zadd_members(args)
    return parsed[1] if parsed else ()


def _geoadd(args):
    parsed = zadd_members(args, geo=True)
    return parsed[1] if parsed else ()


def _hsetex(args):
    parsed = hsetex_fields(args)
    return parsed[1][1::2] if parsed else ()


def _vadd(args):
    parsed = vadd_element(args)
    return parsed if parsed else ()


# command -> (what its elements are called, the elements it writes as a function of the arguments)
ELEMENTS = {
    "hset": ("hash field value", _from(3, 2)),
    "hmset": ("hash field value", _from(3, 2)),
    "hsetnx": ("hash field value", _at(3)),
    "hsetex": ("hash field value", _hsetex),
    "lpush": ("list item", _from(2)),
    "rpush": ("list item", _from(2)),
    "lpushx": ("list item", _from(2)),
    "rpushx": ("list item", _from(2)),
    "linsert": ("list item", _at(4)),
    "lset": ("list item", _at(3)),
    "sadd": ("set member", _from(2)),
    "zadd": ("sorted-set member", _zadd),
    "zincrby": ("sorted-set member", _at(3)),
    "geoadd": ("sorted-set member", _geoadd),
    "vadd": ("vector-set element or attribute", _vadd),
    "vsetattr": ("vector-set attribute", _at(3)),
}


@register
class ElementSize(CommandRule):
    id = "V3"
    order = 403
    title = "element size"

    def __init__(self, settings):
        super().__init__(settings)
        self.max_element_bytes = settings.get("max_element_bytes", 1024, kind=int, minimum=1)
        self.max_vector_dimensions = settings.get("max_vector_dimensions", 4096, kind=int, minimum=1)

    def applies_to(self, spec) -> bool:
        return spec.name in ELEMENTS

    def reads_from(self, spec) -> int:
        # Where the elements are is fixed, but for ZADD's and GEOADD's options before them.
        return 2 if spec.name in ("zadd", "geoadd", "hsetex", "vadd") else NO_ARGUMENTS

    def key_patterns(self, spec):
        return ()  # the key is only named in the reply

    def check(self, call):
        what, elements = ELEMENTS[call.name]
        limit = self.max_element_bytes
        for element in elements(call.args):
            if len(element) > limit:
                key = call.args[1] if len(call.args) > 1 else b""
                return self.finding(f"key '{text(key)}'", f"keep each {what} at most {limit} bytes "
                                    f"(got {len(element)} bytes)")
        if call.name == "vadd":
            found = vadd_dimension(call.args)
            if found is not None and found[0] > self.max_vector_dimensions:
                return self.finding(f"key '{text(call.args[1])}'",
                                    f"keep each vector at most {self.max_vector_dimensions} dimensions (got "
                                    f"{found[0]}: {found[1]}); send embeddings of at most that many dimensions "
                                    f"(a smaller model, or the vector shortened on the client: REDUCE "
                                    f"projects it only after the whole vector was sent)")
        return None

    def describe(self) -> str:
        return (f"hash field values, list items, set and sorted-set members, vector-set elements and attributes "
                f"at most {self.max_element_bytes} bytes; vectors at most {self.max_vector_dimensions} dimensions")
