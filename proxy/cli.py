"""Command line: `redis-guard serve`, `policy check|explain|test|schema|acl|hash-password|infer`,
`schema docs` and `audit`. This module parses the arguments and dispatches: `serve` runs in
`serve/` (serve/command.py), the policy's offline subcommands in policy/command.py, `audit` in
audit/command.py and `policy infer` in infer/command.py (those two declare their own arguments).
"""

from __future__ import annotations

import argparse
import os
import sys

from . import __version__
from .audit.command import add_parser as add_audit_parser
from .infer.command import add_parser as add_infer_parser
from .monitor import logs
from .policy.command import (
    cmd_policy_acl,
    cmd_policy_check,
    cmd_policy_explain,
    cmd_policy_hash_password,
    cmd_policy_schema,
    cmd_policy_test,
    cmd_schema_docs,
)
from .serve.command import cmd_serve
from .serve.options import TLS_FLAGS, UPSTREAM_TLS_FLAGS


def _log_options(parser, defaults: bool) -> None:
    """--log-level and --log-format, before the subcommand (with defaults) and after it."""
    parser.add_argument("--log-level", type=str.upper, choices=logs.LEVELS, help="default INFO",
                        default="INFO" if defaults else argparse.SUPPRESS)
    parser.add_argument("--log-format", choices=logs.FORMATS, help="text (default) or json: one JSON object a line",
                        default="text" if defaults else argparse.SUPPRESS)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="redis-guard", description=__doc__.split("\n")[0])
    parser.add_argument("--version", action="version", version=f"redis-guard {__version__}")
    _log_options(parser, defaults=True)
    commands = parser.add_subparsers(dest="command", required=True)
    serve = commands.add_parser("serve", help="run the proxy")
    serve.add_argument("--config", help="YAML configuration file (e.g. configs/passthrough.yaml)")
    serve.add_argument("--listen", help="HOST:PORT or PORT (127.0.0.1) to accept clients on (default 127.0.0.1:6380)")
    serve.add_argument("--upstream", help="redis://[user:pass@]HOST:PORT[/DB] of the Redis server")
    serve.add_argument("--upstream-cluster", help="HOST:PORT[,HOST:PORT...]: seed nodes of a Redis Cluster")
    serve.add_argument("--upstream-sentinel", help="MASTER@HOST:PORT[,HOST:PORT...]: a master managed by Redis "
                       "Sentinel, and the sentinels to ask for it")
    serve.add_argument("--workers", type=int, help="processes sharing the port (SO_REUSEPORT)")
    serve.add_argument("--policy", help="policy file (e.g. configs/policies/strict-dotted.yaml), or none for no "
                       "rules; default: the built-in baseline")
    serve.add_argument("--shadow-policy", metavar="FILE", help="a candidate policy decided on live traffic "
                       "next to the enforcing one, changing nothing: its would-be rejections are counted and logged")
    serve.add_argument("--learn", metavar="FILE", help="record the commands and key shapes each client uses, "
                       "changing nothing, for `policy infer --from-traffic FILE`")
    serve.add_argument("--upstream-acl", help="on|off: create the policy's ACL users on the upstream (default on)")
    serve.add_argument("--metrics", help="HOST:PORT or PORT (127.0.0.1) to serve /metrics, /healthz, /ready on")
    serve.add_argument("--face", help="standalone|cluster: in front of a cluster, present a standalone server "
                       "(default) or a one-node cluster at the proxy's own address")
    serve.add_argument("--tls-listen", help="HOST:PORT or PORT: a second listener, with TLS (--listen stays plain)")
    for key in TLS_FLAGS:  # Redis's own tls-* names
        serve.add_argument("--tls-" + key.replace("_", "-"), dest="tls_" + key, help="as tls: " + key)
    for key in UPSTREAM_TLS_FLAGS:
        serve.add_argument("--upstream-tls-" + key.replace("_", "-"), dest="upstream_tls_" + key,
                           help="as upstream_tls: " + key + (" (on|off)" if key == "verify" else ""))
    serve.set_defaults(func=cmd_serve)
    policy = commands.add_parser("policy", help="check, explain or test a policy file").add_subparsers(
        dest="policy_command", required=True)
    check = policy.add_parser("check", help="validate a policy file and print what it enforces")
    check.add_argument("file", nargs="?")
    check.add_argument("--builtin", action="store_true", help="the built-in baseline policy instead of a file")
    check.set_defaults(func=cmd_policy_check)
    explain = policy.add_parser("explain", help="the decision for one command, without Redis: "
                                "redis-guard policy explain FILE -- SET user:1 v (exit 1 when rejected)")
    explain.add_argument("file")
    explain.add_argument("--app", help="decide as this application of the policy's applications: section")
    explain.add_argument("command", nargs=argparse.REMAINDER)
    explain.set_defaults(func=cmd_policy_explain)
    test = policy.add_parser("test", help="run fixture files of commands and expected verdicts "
                             "(exit 0 all pass, 1 a case fails, 2 a broken file)")
    test.add_argument("paths", nargs="+", metavar="FILE|DIR")
    test.set_defaults(func=cmd_policy_test)
    schema_json = policy.add_parser("schema", help="print the JSON Schema of policy files "
                                    "(docs/policy.schema.json), generated from the rules")
    schema_json.add_argument("-o", "--output", metavar="FILE", help="write it to FILE instead")
    schema_json.set_defaults(func=cmd_policy_schema)
    acl = policy.add_parser("acl", help="print the ACL users the policy compiles to (ACL SETUSER lines, or an "
                            "ACL file with --format file)")
    acl.add_argument("file", nargs="?")
    acl.add_argument("--builtin", action="store_true", help="the built-in baseline policy instead of a file")
    acl.add_argument("--upstream", help="redis://[user:pass@]HOST:PORT: the password the proxy's users' passwords "
                     "derive from (the proxy's own upstream URL)")
    acl.add_argument("--format", choices=("setuser", "file"), default="setuser")
    acl.set_defaults(func=cmd_policy_acl)
    schema = commands.add_parser("schema", help="the key schema of a policy file").add_subparsers(
        dest="schema_command", required=True)
    docs = schema.add_parser("docs", help="print the schema as a Markdown table")
    docs.add_argument("file")
    docs.set_defaults(func=cmd_schema_docs)
    add_audit_parser(commands)
    add_infer_parser(policy)
    hashing = policy.add_parser("hash-password", help="read a password on stdin, print the "
                                "password_hash an application's entry stores")
    hashing.set_defaults(func=cmd_policy_hash_password)
    for command in commands.choices.values():
        _log_options(command, defaults=False)
    return parser


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    logs.setup(args.log_level, args.log_format)
    try:
        return args.func(args)
    except BrokenPipeError:  # `redis-guard policy check FILE | head`
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0


if __name__ == "__main__":
    sys.exit(main())
