"""The offline subcommands of a policy file, without Redis (over the package's command table):
`policy check|explain|test|schema|acl|hash-password` and `schema docs` (their arguments: cli.py;
`policy infer`: infer/command.py). Each returns the process's exit status."""

from __future__ import annotations

import getpass
import sys

from .. import errors
from ..commands.keyspecs import find_keys
from ..config import ConfigError, parse_upstream
from . import fixtures, json_schema
from .acl import compile_users
from .base import PolicyError
from .building import offline_engine
from .loader import BUILTIN, load_policy
from .offline import REJECT, command_args, decide, unknown
from .passwords import hash_password
from .rules import _scripts
from .schemadoc import markdown, summary


def _policy_file(args) -> str | None:
    """The FILE argument, or None for --builtin; exits with a usage error when neither is given."""
    if getattr(args, "builtin", False):
        return None
    if not args.file:
        print(f"redis-guard policy {args.policy_command}: give a policy FILE or --builtin", file=sys.stderr)
        raise SystemExit(2)
    return args.file



def cmd_policy_check(args) -> int:
    path = _policy_file(args)
    try:
        engine = offline_engine(path)
    except PolicyError as exc:
        print(f"{exc}", file=sys.stderr)
        if len(exc.errors) > 1:
            print(f"{len(exc.errors)} mistakes", file=sys.stderr)
        return 1
    policy = engine.policy
    shown = path if path is not None else f"built-in ({BUILTIN.name}, what serve runs without a policy)"
    convention = f" (convention {policy.seed}, docs/conventions.md)" if policy.seed else ""
    print(f"{shown}: valid policy '{policy.name}'{convention}")
    if policy.description:
        print(f"  {policy.description}")
    print(f"  mode: {policy.mode}" + ("  (dry run: every rule only logs and counts)" if policy.mode == "audit" else ""))
    print(f"  baseline guard: {policy.baseline()}")
    for rule in policy.rules:
        mode = engine.modes.get(rule.id, "off")
        print(f"  {rule.id:<4} {mode:<8} {rule.title}: {rule.describe()}")
    if policy.schema is not None:
        enforced = "enforced by K10" if policy.rule("K10") is not None else "documentation only: no rule K10"
        print(f"  schema: {len(policy.schema)} key patterns ({enforced})")
        for pattern in policy.schema:
            print(f"    {summary(pattern)}")
    planned = sum(1 for name, plan in engine.plans.items() if plan is not None and name.islower())
    print(f"  compiled into {planned} commands")
    reviews = _review_scripts(engine)  # C6's approved scripts, read against the policy
    if engine.tenants is not None:
        print(f"  auth: {policy.auth}  (clients authenticate to the proxy; their credentials never reach Redis)")
        for app in policy.applications:
            app_engine = engine.tenants.engine(app.name)
            overrides = [rule for rule in app.rules if rule.id in app.overrides]
            print(f"  application '{app.name}' (user {app.user}): prefixes "
                  f"{', '.join(app.prefixes) or 'none'}{', read-only' if app.read_only else ''}")
            for rule in overrides:
                print(f"    {rule.id:<4} {app_engine.modes.get(rule.id, 'off'):<8} {rule.title}: {rule.describe()}")
    for review in reviews:
        print(f"  {review}")
    return 1 if any(review.level == "error" for review in reviews) else 0


def _review_scripts(engine) -> list:
    """`policy check`'s review of rule C6's approved scripts (policy/rules/_scripts.py)."""
    rule = engine.policy.rule("C6")
    if rule is None or getattr(rule, "scripts", None) != "approved" or rule.mode == "off":
        return []
    t1 = engine.policy.rule("T1")
    return _scripts.review(rule.library, engine.policy.rules, engine.table, t1 is not None and t1.mode != "off")


def cmd_policy_hash_password(args) -> int:
    """The stored form of a password for an application's `password_hash`. The password is read
    from stdin (without echo on a terminal), never from the command line, where `ps` shows it."""
    if sys.stdin.isatty():
        password = getpass.getpass("password: ")
        if getpass.getpass("again: ") != password:
            print("redis-guard: the passwords differ", file=sys.stderr)
            return 1
    else:
        password = sys.stdin.readline().rstrip("\r\n")
    if not password:
        print("redis-guard: empty password", file=sys.stderr)
        return 1
    print(hash_password(password.encode("utf-8")))
    return 0


def cmd_policy_explain(args) -> int:
    """Exit status: 0 allowed (rewritten or audited included), 1 rejected, 2 a usage error, a
    broken policy or a command Redis would refuse whatever the policy (unknown, wrong arity)."""
    words = args.command[1:] if args.command[:1] == ["--"] else args.command
    command = command_args(words[0] if len(words) == 1 else words) if words else None
    if not command:
        print("redis-guard policy explain FILE -- COMMAND [ARG...]  (or one quoted command line)" if not words
              else f"redis-guard: unbalanced quotes in {words[0]!r}", file=sys.stderr)
        return 2
    try:
        engine = offline_engine(args.file)
    except PolicyError as exc:
        print(f"{exc}", file=sys.stderr)
        return 2
    if args.app is not None:
        app_engine = engine.tenants.engine(args.app) if engine.tenants is not None else None
        if app_engine is None:
            names = [app.name for app in engine.policy.applications]
            print(f"redis-guard: no application '{args.app}' in {args.file} "
                  f"(applications: {', '.join(names) or 'none'})", file=sys.stderr)
            return 2
        engine = app_engine
    refused = unknown(engine.table, command)
    if refused:
        print(f"{command[0].decode('utf-8', 'replace').upper()}: {refused}: Redis refuses it whatever the "
              f"policy (the proxy forwards it and the client gets Redis's error)")
        return 2
    plan = engine.plan_for(command)
    if plan is None:
        print(f"{command[0].decode('utf-8', 'replace').upper()}: no rule of '{engine.policy.name}' applies: "
              "forwarded unchanged")
        return 0
    if engine.policy.schema is not None:
        _explain_schema(engine, command)
    rules = [rule.id for rule in (plan.command_rules or ())]
    if plan.check_keys:
        rules = [rule.id for rule in engine.key_rules] + rules
    rules += [rule.id for rule in (plan.rewrite_rules or ())]
    rules = list(dict.fromkeys(rules))  # a rule that both checks and rewrites is named once
    print(f"{plan.spec.name.upper()}: rules that run: {', '.join(rules) or 'none'}")
    outcome = decide(engine, command)
    for finding in outcome.findings:
        print(f"  {finding.rule} fired ({finding.mode}): {errors.violation_text(finding)}")
    print(f"decision: {outcome.describe()}")
    return 1 if outcome.verdict == REJECT else 0


def _explain_schema(engine, command) -> None:
    """The schema pattern of every key of the command."""
    spec = engine.table.lookup(command)
    if spec is None:
        return
    for index, _ in find_keys(spec, command):
        key = command[index]
        pattern = engine.policy.schema.match(key)
        shown = key.decode("utf-8", "backslashreplace")
        if pattern is None:
            print(f"key '{shown}': no schema pattern")
        else:
            print(f"key '{shown}': schema pattern '{pattern.pattern}' ({pattern.type})")


def cmd_policy_test(args) -> int:
    return fixtures.run(args.paths, sys.stdout)


def cmd_policy_schema(args) -> int:
    if args.output is None:
        sys.stdout.write(json_schema.text())
    else:
        with open(args.output, "w", encoding="utf-8") as handle:
            handle.write(json_schema.text())
    return 0


def cmd_policy_acl(args) -> int:
    """The policy's ACL users (policy/acl.py), for operators who manage Redis users themselves:
    ACL SETUSER lines (redis-cli reads them on stdin), or an ACL file's `user` lines."""
    path = _policy_file(args)
    try:
        engine = offline_engine(path)
        upstream = parse_upstream(args.upstream) if args.upstream else None
    except (PolicyError, ConfigError) as exc:
        print(f"{exc}", file=sys.stderr)
        return 1
    users = compile_users(engine, upstream.password if upstream is not None else None)
    for user in users.users:
        print(user.line() if args.format == "file" else " ".join(user.setuser()))
    whose = "the upstream URL's password" if upstream is not None and upstream.password else "no upstream password"
    print(f"{len(users.users)} users of policy '{users.policy_name}'; passwords derived from {whose} "
          "(docs/policy.md, \"The second wall\")", file=sys.stderr)
    return 0


def cmd_schema_docs(args) -> int:
    try:
        policy = load_policy(args.file)
    except PolicyError as exc:
        print(f"{exc}", file=sys.stderr)
        return 1
    if policy.schema is None:
        print(f"{args.file}: no 'schema:' section (docs/policy.md, \"Key schema\")", file=sys.stderr)
        return 1
    sys.stdout.write(markdown(policy, args.file, policy.rule("K10")))
    return 0
