"""The proxy's one object per command name (reader.command_name): the compiled split hands out
the object the tables were keyed by, so that a lookup matches by identity; names it does not know
come as new objects, equal all the same. Pure Python splits make new objects: equal is what the
reader promises, identity only what the compiled build adds."""

from __future__ import annotations

import hiredis
import pytest

from proxy.resp import reader
from proxy.session.behaviour import both_cases

pytestmark = pytest.mark.skipif(reader._split is None, reason="the compiled request split is not built")


def split(data: bytes) -> list:
    commands = []
    assert reader._split(data, 1000, 10 ** 6, commands) == len(data)
    return commands


def names_of(*commands):
    return [args[0] for args in split(b"".join(hiredis.pack_command(c) for c in commands))]


def test_a_tables_name_comes_as_the_tables_own_object():
    table = both_cases({"get": 1, "hset": 2})
    keys = {key: key for key in table}
    for _ in range(3):  # the first from the registry, then from the recent ones
        got = names_of(("GET", "k"), ("get", "k"), ("HSET", "h", "f", "v"))
        assert got == [b"GET", b"get", b"HSET"]
        assert all(name is keys[name] for name in got)


def test_an_unknown_name_is_a_new_object_each_time():
    first, second = names_of(("NOSUCHCOMMAND", "k"), ("NOSUCHCOMMAND", "k"))
    assert first == second == b"NOSUCHCOMMAND"
    assert first is not second


def test_names_that_share_a_slot_are_never_confused():
    table = both_cases({"get": 1, "gut": 2, "gat": 3})
    keys = {key: key for key in table}
    got = names_of(("GET", "k"), ("GAT", "k"), ("GUT", "k"), ("GET", "k"), ("GATX", "k"), ("G", "k"), ("", "k"))
    assert got == [b"GET", b"GAT", b"GUT", b"GET", b"GATX", b"G", b""]
    assert all(name is keys[name] for name in got[:4])


def test_only_the_first_argument_is_a_name():
    table = both_cases({"get": 1})
    (key,) = [k for k in table if k == b"get"]
    commands = split(hiredis.pack_command(("ECHO", "get")))
    assert commands[0][1] == b"get" and commands[0][1] is not key
