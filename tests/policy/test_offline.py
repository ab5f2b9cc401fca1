"""`redis-guard policy explain` and what it shares with `policy test` (`policy/offline.py`): one
quoted command line split like redis-cli, unknown commands named with the nearest real ones, and
exit codes a CI job can gate on (0 allowed, 1 rejected, 2 refused whatever the policy)."""

from __future__ import annotations

import os

import pytest

from proxy import cli
from proxy.commands.table import CommandTable
from proxy.policy.offline import command_args, unknown
from tests.servers import REPO

STRICT = os.path.join(REPO, "configs", "policies", "strict-dotted.yaml")
TABLE = CommandTable.from_snapshot()


@pytest.mark.parametrize("given, args", [
    ("SET k v", [b"SET", b"k", b"v"]),
    ('SET "key with space" v', [b"SET", b"key with space", b"v"]),
    ("SET 'it''s' v", None),  # redis-cli: a closing quote must be followed by a space
    ('SET "a\\x41\\n" v', [b"SET", b"aA\n", b"v"]),
    ('SET "open v', None),
    (["SET", "key with space", "v"], [b"SET", b"key with space", b"v"]),
    (["INCRBY", "k", 5], [b"INCRBY", b"k", b"5"]),
])
def test_command_args(given, args):
    assert command_args(given) == args


@pytest.mark.parametrize("args, words", [
    ("GET k", ""),
    ("CONFIG GET maxmemory", ""),
    ("SETX a b", "unknown command 'SETX' (did you mean SETNX, SETEX or SET?)"),
    ("FLUSHAL", "unknown command 'FLUSHAL' (did you mean FLUSHALL?)"),
    ("CONFIG GETT x", "unknown subcommand 'GETT' of CONFIG (did you mean GET"),
    ("GET", "wrong number of arguments for 'get' command"),
    ("GET a b", "wrong number of arguments for 'get' command"),
    ("CONFIG SET a", "wrong number of arguments for 'config set' command"),
])
def test_unknown(args, words):
    found = unknown(TABLE, command_args(args))
    assert found.startswith(words) and bool(found) == bool(words), found


@pytest.mark.parametrize("command, status, words", [
    (["--", "SET", "user:basic.info:1:string", "v", "EX", "60"], 0, "decision: allowed, forwarded unchanged"),
    (["--", "SET user:basic.info:1:string v EX 60"], 0, "decision: allowed, forwarded unchanged"),
    (["--", 'SET "user basic" v EX 60'], 1, "decision: rejected by K1: -NOPERM key 'user basic' breaks rule K1"),
    (["SET", "User:basic.info:1:string", "v", "EX", "60"], 1, "decision: rejected by K2"),
    (["--", "DEL", "user:basic.info:1:string"], 0,
     "decision: rewritten by C4, sent as: UNLINK user:basic.info:1:string"),
    (["--", "HGETALL", "user:basic.info:1:hash"], 0, "(audit: C3)"),
    (["--", "KEYS", "*"], 1, "rejected by C1"),
    (["--", "PING"], 0, "PING: no rule of 'strict-dotted' applies: forwarded unchanged"),
    (["--", "SETX", "a", "b"], 2, "SETX: unknown command 'SETX' (did you mean SETNX, SETEX or SET?): Redis refuses it"),
    (["--", "SET k"], 2, "wrong number of arguments for 'set' command"),
])
def test_explain_exit_status(capsys, command, status, words):
    assert cli.main(["policy", "explain", STRICT, *command]) == status
    assert words in capsys.readouterr().out


def test_explain_usage_and_broken_policy(tmp_path, capsys):
    assert cli.main(["policy", "explain", STRICT]) == 2
    assert cli.main(["policy", "explain", STRICT, "--", 'GET "a']) == 2
    assert "unbalanced quotes" in capsys.readouterr().err
    broken = tmp_path / "broken.yaml"
    broken.write_text("rules:\n  C2: {deny: [FLUSHAL]}\n")
    assert cli.main(["policy", "explain", str(broken), "--", "GET", "a"]) == 2
    assert "did you mean FLUSHALL?" in capsys.readouterr().err
