"""Key classes: which bytes of a key name the rules cannot tell apart, as one translate table.

A rule that reads a key only through regexes (every key rule's `pattern`, T1's and T3's
`persistent` globs, K6's type words) sees each byte of the key only through the atoms of those
regexes: literals, ranges, categories, `.`. Python's `re` has no other way to look at a byte when
a pattern has no backreferences (under `(?i)` an atom accepts both cases of its ASCII letters). So
two bytes that every atom accepts or refuses alike are interchangeable: `user:1042:profile` and
`aaaa:0000:aaaaaaa` get the same verdict under the strictest preset. `class_table` maps each byte to one byte
of its class; the engine
caches verdicts by `key.translate(table)`, so a keyspace of millions of ids costs a handful of
entries that stay in the CPU's cache (a lookup in a table of 100,000 keys misses it three times).

Bytes from 0x80 up are always classes of their own: patterns over decoded text count characters,
and keeping non-ASCII bytes as they are keeps every character boundary where it was. A pattern the
walk does not understand gives no table: the engine then uses the key itself. So does every
pattern when this Python's `re` has no parser we know (`PARSER`: `re._parser` from 3.11, else the
older `sre_parse`): the verdicts stay the same, only the cache holds keys instead of classes.
"""

from __future__ import annotations

import importlib
import re
import warnings

ASCII = range(0x80)
PRINTABLE_FIRST = (*range(0x20, 0x7F), *range(0x20), 0x7F)

# Where `re` keeps its own parser (its parse tree has the same atoms it matches with): private
# modules, so each is taken only when it has every name the walk reads.
PARSERS = (("re._constants", "re._parser"), ("sre_constants", "sre_parse"))  # 3.11+, then older
NEEDED = ("LITERAL", "NOT_LITERAL", "ANY", "IN", "RANGE", "CATEGORY", "NEGATE", "AT", "BRANCH", "SUBPATTERN",
          "MAX_REPEAT", "MIN_REPEAT", "POSSESSIVE_REPEAT", "ATOMIC_GROUP", "ASSERT", "ASSERT_NOT",
          "AT_BOUNDARY", "AT_NON_BOUNDARY", "CATEGORY_DIGIT", "CATEGORY_NOT_DIGIT", "CATEGORY_SPACE",
          "CATEGORY_NOT_SPACE", "CATEGORY_WORD", "CATEGORY_NOT_WORD", "CATEGORY_LINEBREAK",
          "CATEGORY_NOT_LINEBREAK")


def re_parser():
    """(constants, parser) modules of this Python's `re`, or None when none usable is found."""
    for constants_name, parser_name in PARSERS:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # sre_* since 3.11
                constants = importlib.import_module(constants_name)
                parser = importlib.import_module(parser_name)
        except ImportError:
            continue
        if all(hasattr(constants, name) for name in NEEDED) and callable(getattr(parser, "parse", None)):
            return constants, parser
    return None


PARSER = re_parser()  # None: no key classes (`class_table` gives None), the engine uses keys as they are
sre, sre_parse = PARSER or (None, None)

if PARSER is not None:
    _CATEGORIES = {
        sre.CATEGORY_DIGIT: r"\d", sre.CATEGORY_NOT_DIGIT: r"\d",
        sre.CATEGORY_SPACE: r"\s", sre.CATEGORY_NOT_SPACE: r"\s",
        sre.CATEGORY_WORD: r"\w", sre.CATEGORY_NOT_WORD: r"\w",
        sre.CATEGORY_LINEBREAK: r"\n", sre.CATEGORY_NOT_LINEBREAK: r"\n",
    }
    _REPEATS = (sre.MAX_REPEAT, sre.MIN_REPEAT, sre.POSSESSIVE_REPEAT)
    _BOUNDARIES = (sre.AT_BOUNDARY, sre.AT_NON_BOUNDARY)


class Opaque(Exception):
    """A pattern whose view of a byte is more than the atoms (backreferences, locales)."""


def class_table(patterns) -> bytes | None:
    """The translate table of the classes of bytes that no pattern tells apart (str or bytes
    regexes, as compiled with re.S), or None when there is nothing to gain or a pattern is
    opaque. None too when this Python's `re` has no parser we know (`PARSER`)."""
    if PARSER is None:
        return None
    tests: set[frozenset[int]] = set()
    try:
        for pattern in patterns:
            parsed = sre_parse.parse(pattern, re.S)
            if parsed.state.flags & re.LOCALE:
                raise Opaque(pattern)
            _collect(parsed, Atoms(tests, isinstance(pattern, str), bool(parsed.state.flags & re.IGNORECASE)))
    except (Opaque, re.error, RecursionError):
        return None
    except (AttributeError, TypeError, ValueError):  # a parse tree of another shape than the walk knows
        return None
    first: dict[tuple, int] = {}
    table = bytearray(range(256))
    for byte in PRINTABLE_FIRST:  # a class is shown by a printable byte when it has one
        signature = tuple(byte in test for test in tests)
        table[byte] = first.setdefault(signature, byte)
    table = bytes(table)
    return None if table == bytes(range(256)) else table


class Atoms:
    """The byte sets the atoms of one pattern (or of one of its groups) test."""

    __slots__ = ("tests", "text", "fold")

    def __init__(self, tests: set, text: bool, fold: bool):
        self.tests = tests
        self.text = text  # a str pattern (categories differ a little from bytes patterns')
        self.fold = fold  # under (?i)

    def add(self, values) -> None:
        values = frozenset(value for value in values if value < 0x80)
        if self.fold:
            values |= {ord(chr(value).swapcase()) for value in values if chr(value).isalpha()}
        self.tests.add(values)

    def category(self, category) -> None:
        source = _CATEGORIES.get(category)
        if source is None:
            raise Opaque(category)
        if self.text:
            match = re.compile(source).fullmatch
            self.add(byte for byte in ASCII if match(chr(byte)))
        else:
            match = re.compile(source.encode()).fullmatch
            self.add(byte for byte in ASCII if match(bytes((byte,))))

    def scoped(self, add_flags: int, del_flags: int) -> Atoms:
        if (add_flags | del_flags) & re.LOCALE:
            raise Opaque(add_flags)
        fold = (self.fold or bool(add_flags & re.IGNORECASE)) and not del_flags & re.IGNORECASE
        return self if fold == self.fold else Atoms(self.tests, self.text, fold)


def _collect(items, atoms: Atoms) -> None:
    for op, av in items:
        if op in (sre.LITERAL, sre.NOT_LITERAL):
            atoms.add((av,))
        elif op is sre.ANY:
            atoms.add((0x0A,))  # '.' without re.S refuses newlines: keep them apart
        elif op is sre.IN:
            for inner, value in av:
                if inner is sre.LITERAL:
                    atoms.add((value,))
                elif inner is sre.RANGE:
                    atoms.add(range(value[0], min(value[1], 0x7F) + 1))
                elif inner is sre.CATEGORY:
                    atoms.category(value)
                elif inner is not sre.NEGATE:
                    raise Opaque(inner)
        elif op is sre.CATEGORY:
            atoms.category(av)
        elif op is sre.AT:
            if av in _BOUNDARIES:
                atoms.category(sre.CATEGORY_WORD)
            atoms.add((0x0A,))  # '^' and '$' look for line ends
        elif op is sre.BRANCH:
            for branch in av[1]:
                _collect(branch, atoms)
        elif op is sre.SUBPATTERN:
            _collect(av[3], atoms.scoped(av[1], av[2]))
        elif op in _REPEATS:
            _collect(av[2], atoms)
        elif op is sre.ATOMIC_GROUP:
            _collect(av, atoms)
        elif op in (sre.ASSERT, sre.ASSERT_NOT):
            _collect(av[1], atoms)
        else:  # GROUPREF, GROUPREF_EXISTS: the match compares bytes with bytes
            raise Opaque(op)
