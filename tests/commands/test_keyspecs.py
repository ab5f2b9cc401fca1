import itertools

import pytest

from proxy.commands import GETKEYS_PROCS, CommandTable, find_keys, resolves_all_keys
from proxy.commands.keyspecs import parse_numkeys

from .cases import GETKEYS_DIVERGES, INVALID_CASES, KEY_CASES, NO_KEY_CASES, split


@pytest.mark.parametrize(("line", "expected"), KEY_CASES)
def test_key_positions(table: CommandTable, line: str, expected: list[int]) -> None:
    args = split(line)
    assert [i for i, _ in table.key_positions(args)] == expected


@pytest.mark.parametrize("line", NO_KEY_CASES)
def test_commands_without_keys(table: CommandTable, line: str) -> None:
    args = split(line)
    spec = table.lookup(args)
    assert spec is not None
    assert not spec.has_keys
    assert table.key_positions(args) == []


@pytest.mark.parametrize("line", INVALID_CASES)
def test_invalid_arguments_yield_no_keys(table: CommandTable, line: str) -> None:
    assert table.key_positions(split(line)) == []


@pytest.mark.parametrize(("line", "expected", "why"), GETKEYS_DIVERGES)
def test_where_we_differ_from_getkeys(table: CommandTable, line: str, expected: list[int], why: str) -> None:
    assert [i for i, _ in table.key_positions(split(line))] == expected, why


@pytest.mark.parametrize(("line", "flags"), [
    ("GET k", [{"RO", "ACCESS"}]),
    ("SET k v", [{"OW", "UPDATE"}]),
    ("SET k v get", [{"RW", "ACCESS", "UPDATE"}]),
    ("SET k v NX GET EX 10", [{"RW", "ACCESS", "UPDATE"}]),
    ("SET k get", [{"OW", "UPDATE"}]),  # the value is 'get', not the option
    ("BITFIELD k GET u8 0 OVERFLOW SAT", [{"RO", "ACCESS"}]),
    ("BITFIELD k GET u8 0 INCRBY u8 0 1", [{"RW", "ACCESS", "UPDATE"}]),
    ("BITFIELD k", [{"RO", "ACCESS"}]),
    ("DEL k", [{"RM", "DELETE"}]),
    ("LPUSH k v", [{"RW", "INSERT"}]),
    ("RENAME a b", [{"RW", "ACCESS", "DELETE"}, {"OW", "UPDATE"}]),
    ("SORT k STORE d", [{"RO", "ACCESS"}, {"OW", "UPDATE"}]),
    ('MIGRATE h 1 "" 0 5 KEYS a b', [{"RW", "ACCESS", "DELETE"}] * 2),
    ("MIGRATE h 1 k 0 5", [{"RW", "ACCESS", "DELETE"}]),
    ("EVAL s 1 k", [{"RW", "ACCESS", "UPDATE"}]),
    ("GEORADIUS k 0 0 1 km STORE d", [{"RO", "ACCESS"}, {"OW", "UPDATE"}]),
])
def test_key_flags(table: CommandTable, line: str, flags: list[set[str]]) -> None:
    assert [set(ks.flags) for _, ks in table.key_positions(split(line))] == flags


def test_not_key_specs_only_on_request(table: CommandTable) -> None:
    spec = table["spublish"]
    assert not spec.has_keys
    assert find_keys(spec, split("SPUBLISH ch msg")) == []
    found = find_keys(spec, split("SPUBLISH ch msg"), include_not_keys=True)
    assert [i for i, _ in found] == [1] and "NOT_KEY" in found[0][1].flags
    assert [i for i, _ in find_keys(table["ssubscribe"], split("SSUBSCRIBE a b"), include_not_keys=True)] == [1, 2]


def test_key_specs_returned_are_the_commands_own(table: CommandTable) -> None:
    spec = table["sort"]
    (_, sort_key), (_, store) = table.key_positions(split("SORT k STORE d"))
    assert sort_key is spec.key_specs[0]
    assert store is spec.key_specs[2]
    assert "STORE" in store.notes


@pytest.mark.parametrize(("raw", "value"), [
    (b"0", 0), (b"1", 1), (b"12", 12), (b"01", None), (b"-1", None), (b"+1", None),
    (b"", None), (b"1x", None), (b" 1", None), (b"1.0", None), (b"9" * 21, None),
])
def test_parse_numkeys_is_string2ll(raw: bytes, value: int | None) -> None:
    assert parse_numkeys(raw) == value


def test_incomplete_commands_have_procs(table: CommandTable) -> None:
    """Every 7.0 command whose specs make Redis fall back to a getkeys proc has one here."""
    needing = sorted(
        spec.name for spec in table.walk()
        if any(ks.begin_search.kind == "unknown" or ks.find_keys.kind == "unknown"
               or ks.flags & {"INCOMPLETE", "VARIABLE_FLAGS"} for ks in spec.key_specs)
    )
    assert needing == ["bitfield", "migrate", "set", "sort", "sort_ro"]
    assert sorted(GETKEYS_PROCS) == needing


def test_resolves_all_keys(table: CommandTable) -> None:
    assert not resolves_all_keys(table["sort"])  # BY/GET patterns name keys
    assert not resolves_all_keys(table["sort_ro"])
    assert resolves_all_keys(table["migrate"])
    assert resolves_all_keys(table["set"])
    assert resolves_all_keys(table["get"])
    assert resolves_all_keys(table["xread"])


FILLERS = [b"1", b"x", b"0", b"2", b"", b"-1", b"STORE", b"STREAMS", b"KEYS", b"GET", b"BY", b"LIMIT", b"STOREDIST"]


def _synthetic_args(name: str, arity: int):
    head = [part.encode() for part in name.split("|")]
    lengths = range(len(head), abs(arity) + 7)
    for n in lengths:
        extra = n - len(head)
        for filler in FILLERS:
            yield head + [filler] * extra
        yield head + [FILLERS[(i * 7 + n) % len(FILLERS)] for i in range(extra)]
        yield head + list(itertools.islice(itertools.cycle([b"1", b"k", b"STORE", b"d"]), extra))


def _specs_with_keys():
    return [spec for spec in CommandTable.from_snapshot().walk() if spec.key_specs]


@pytest.mark.parametrize("spec", _specs_with_keys(), ids=lambda s: s.name)
def test_every_command_yields_keys_in_range(spec) -> None:
    for args in _synthetic_args(spec.name, spec.arity):
        found = find_keys(spec, args)
        positions = [i for i, _ in found]
        assert len(set(positions)) == len(positions), args
        for i, ks in found:
            assert 1 <= i < len(args), (args, found)
            assert "VARIABLE_FLAGS" not in ks.flags
            assert ks in spec.key_specs or ks.begin_search in {k.begin_search for k in spec.key_specs}


@pytest.mark.parametrize("spec", [s for s in _specs_with_keys() if "movablekeys" not in s.flags and s.has_keys],
                         ids=lambda s: s.name)
def test_fixed_key_commands_always_find_their_keys(spec) -> None:
    """Commands whose keys do not move find at least one key in any well-sized call."""
    head = [part.encode() for part in spec.name.split("|")]
    args = head + [b"1"] * (abs(spec.arity) - len(head))
    assert find_keys(spec, args)
