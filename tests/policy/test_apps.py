"""Applications and namespaces (K7): loading, password hashes, prefixes, read-only, overrides."""

import os
import subprocess
import sys
from functools import cache

import pytest

from proxy.commands.table import CommandTable
from proxy.policy.base import AUDIT, ENFORCE
from proxy.policy.engine import Engine
from proxy.policy.loader import load_policy_text
from proxy.policy.passwords import HashFormatError, PasswordHash, Verified, hash_password
from proxy.policy.rules.k7_namespaces import WRITE_KEY_FLAGS, ReadOnly
from tests.policy.helpers import load_error
from tests.servers import REPO

CHEAP = {"log_n": 4}  # the format and the check are what is tested here, not the cost
HASH = hash_password(b"pw", **CHEAP)

POLICY = f"""
name: shop
auth: required
applications:
  checkout:
    password_hash: "{HASH}"
    prefixes: ["shop:order:", "shop:cart:"]
    rules:
      T3: {{max_ttl: 60}}
      K2: off
  reports:
    user: rep
    password_hash: "{HASH}"
    prefixes: "shop:"
    read_only: true
  idle:
    password_hash: "{HASH}"
rules:
  K2: {{style: lowercase}}
  K7: {{anonymous: reject}}
  T3: {{min_ttl: 5, max_ttl: 3600}}
  C2: off  # else the baseline denies SWAPDB, MOVE, KEYS before K7 is asked
"""


@cache
def table() -> CommandTable:
    return CommandTable.from_snapshot()


@cache
def engine(text: str = POLICY) -> Engine:
    return Engine(load_policy_text(text), table())


def decide(app: str | None, command: str, text: str = POLICY):
    base = engine(text)
    chosen = base if app is None else base.tenants.engine(app)
    args = [word.encode() for word in command.split()]
    plan = chosen.plan_for(args)
    return None if plan is None else chosen.decide(plan, args)


# -- password hashes -----------------------------------------------------------------------

def test_hash_round_trip_and_salt():
    stored = hash_password(b"s3cret", **CHEAP)
    parsed = PasswordHash.parse(stored)
    assert str(parsed) == stored and stored.startswith("$scrypt$ln=4,r=8,p=1$")
    assert parsed.matches(b"s3cret") and not parsed.matches(b"s3cret ") and not parsed.matches(b"")
    assert hash_password(b"s3cret", **CHEAP) != stored  # a fresh salt each time
    assert "s3cret" not in stored and parsed.salt.hex() not in repr(parsed)


def test_default_cost_is_slow_scrypt():
    parsed = PasswordHash.parse(hash_password(b"x"))
    assert (parsed.log_n, parsed.r, parsed.p, len(parsed.salt), len(parsed.digest)) == (14, 8, 1, 16, 32)


@pytest.mark.parametrize("text", [
    "", "plain-password", "$2b$12$abcdefghijklmnopqrstuv", "$scrypt$ln=14,r=8,p=1$c2FsdHNhbHQ",
    "$scrypt$ln=0,r=8,p=1$c2FsdHNhbHQ$" + "A" * 43, "$scrypt$ln=40,r=8,p=1$c2FsdHNhbHQ$" + "A" * 43,
    "$scrypt$ln=14,r=8,p=1$c2E$" + "A" * 43,  # salt too short
])
def test_malformed_hashes(text):
    with pytest.raises(HashFormatError):
        PasswordHash.parse(text)


def test_verified_credentials_are_remembered_by_keyed_digest():
    verified = Verified()
    verified.add(verified.tag(b"user", b"pw"), "app")
    assert verified.get(verified.tag(b"user", b"pw")) == "app"
    assert verified.get(verified.tag(b"user", b"pw2")) is None
    assert verified.get(verified.tag(b"use", b"rpw")) is None
    assert Verified().tag(b"user", b"pw") != verified.tag(b"user", b"pw")  # keyed per process


def test_tenants_check_credentials():
    tenants = engine().tenants
    assert tenants.check(b"checkout", b"pw").name == "checkout"
    assert tenants.check(b"rep", b"pw").name == "reports"
    assert tenants.check(b"reports", b"pw") is None  # the user name, not the application name
    assert tenants.check(b"checkout", b"PW") is None and tenants.check(b"nobody", b"pw") is None
    tag = tenants.tag(b"checkout", b"pw")
    assert tenants.cached(tag) is None
    tenants.remember(tag, tenants.check(b"checkout", b"pw"))
    assert tenants.cached(tag).name == "checkout"


# -- loading -------------------------------------------------------------------------------

def test_loaded_applications():
    policy = load_policy_text(POLICY)
    assert policy.auth == "required"
    apps = {app.name: app for app in policy.applications}
    assert [(app.user, app.prefixes, app.read_only, app.overrides) for app in apps.values()] == [
        ("checkout", ("shop:order:", "shop:cart:"), False, ("T3", "K2")),
        ("rep", ("shop:",), True, ()),
        ("idle", (), False, ()),
    ]
    assert load_policy_text(POLICY.replace("auth: required", "auth: optional")).auth == "optional"
    assert load_policy_text(POLICY.replace("auth: required\n", "")).auth == "required"  # the default


APP = f'password_hash: "{HASH}"'


@pytest.mark.parametrize("text, line, message", [
    ("auth: required\n", 1, "'auth' needs an 'applications' section"),
    ("rules:\n  K7: {}\n", 2, "rule K7 needs an 'applications' section"),
    (f"auth: sometimes\napplications:\n  a: {{{APP}}}\n", 1, "'auth' must be required or optional"),
    ("applications: [a, b]\n", 1, "'applications' must be a mapping"),
    ("applications:\n  a: 1\n", 2, "application 'a': settings must be a mapping"),
    ("applications:\n  a:\n    prefixes: [x:]\n", 2, "'password_hash' is missing"),
    ("applications:\n  a:\n    password_hash: secret\n", 3, "application 'a': 'password_hash': expected"),
    (f"applications:\n  a:\n    {APP}\n    prefix: [x:]\n", 4, "unknown setting 'prefix'"),
    (f"applications:\n  a:\n    {APP}\n    prefixes: [x:, '']\n", 4, "'prefixes' must be a list"),
    (f"applications:\n  a:\n    {APP}\n    read_only: yes please\n", 4, "'read_only' must be true/false"),
    (f"applications:\n  a:\n    {APP}\n    user: two words\n", 4, "'user' must be a user name"),
    (f"applications:\n  a: {{{APP}}}\n  b: {{{APP}, user: a}}\n", 3, "user 'a' already belongs to application 'a'"),
    (f"applications:\n  a: {{{APP}}}\n  a: {{{APP}}}\n", 3, "application 'a' appears twice"),
    (f"applications:\n  a:\n    {APP}\n    rules:\n      T3: {{max_tll: 5}}\n", 5, "rule T3: unknown setting"),
    (f"applications:\n  a:\n    {APP}\n    rules:\n      K99: {{}}\n", 5, "unknown rule 'K99'"),
    (f"applications:\n  a:\n    {APP}\n    rules: [T3]\n", 4, "'applications: a: rules' must be a mapping"),
    (f"applications:\n  a:\n    {APP}\nrules:\n  K7: {{anonymous: maybe}}\n", 5, "'anonymous' must be one of"),
    # An override is validated merged with the policy's own settings.
    (f"applications:\n  a:\n    {APP}\n    rules:\n      T3: {{max_ttl: 2}}\nrules:\n  T3: {{min_ttl: 5}}\n",
     None, "rule T3"),
])
def test_load_errors_name_their_line(text, line, message):
    error = load_error(text, "p.yaml")
    assert message in error.message
    if line is not None:
        assert error.line == line, error


# -- K7: prefixes, read-only, anonymous clients ---------------------------------------------

@pytest.mark.parametrize("app, command, rule", [
    ("checkout", "GET shop:order:1", None),
    ("checkout", "SET shop:cart:1 v EX 30", None),
    ("checkout", "GET shop:product:1", "K7"),  # reads are checked as writes are
    ("checkout", "SET shop:product:1 v EX 30", "K7"),
    ("checkout", "GET shop:order", "K7"),  # the prefix includes its delimiter
    ("checkout", "MGET shop:order:1 other:1", "K7"),
    ("checkout", "RENAME shop:order:1 shop:product:1", "K7"),  # destination keys too
    ("checkout", "COPY shop:order:1 shop:cart:1", None),
    ("checkout", "EVAL s 1 other:1", "K7"),
    ("checkout", "SET Shop:Order:1 v EX 30", "K7"),  # K2 off for checkout; still outside
    ("checkout", "PING", None),
    ("reports", "GET shop:product:1", None),
    ("reports", "GET other:1", "K7"),
    ("reports", "SET shop:product:1 v EX 30", "K7"),  # read-only
    ("reports", "DEL shop:product:1", "K7"),
    ("reports", "EVAL s 1 shop:product:1", "K7"),  # may write
    ("reports", "EVAL_RO s 1 shop:product:1", None),
    ("reports", "FUNCTION FLUSH", "K7"),
    ("reports", "PFCOUNT shop:hll", None),
    ("reports", "GET Shop:product:1", "K2"),  # the policy's other rules still apply
    ("idle", "GET shop:order:1", "K7"),  # applied for nothing
    ("idle", "INFO", None),
    (None, "GET shop:order:1", "K7"),  # no application: anonymous: reject
    (None, "PING", None),
])
def test_namespace(app, command, rule):
    verdict = decide(app, command)
    fired = None if verdict is None or verdict.reject is None else verdict.reject.rule
    assert fired == rule, verdict and verdict.findings


@pytest.mark.parametrize("app, command, outcome", [
    # (application, command, "K7" refused / None passes / the command sent instead)
    ("checkout", "SCAN 0", "K7"),  # two prefixes: one SCAN each
    ("checkout", "SCAN 0 MATCH shop:order:*", None),
    ("checkout", "SCAN 0 MATCH shop:order:1?", None),
    ("checkout", "SCAN 0 COUNT 10 MATCH shop:cart:* TYPE hash", None),
    ("checkout", "SCAN 0 MATCH shop:*", "K7"),  # would list shop:product: keys too
    ("checkout", "SCAN 0 MATCH shop:ord*", "K7"),
    ("checkout", "SCAN 0 MATCH shop:order[:]*", "K7"),  # a glob class: not a literal start
    ("checkout", "SCAN 0 MATCH shop:order:* MATCH *", "K7"),  # the last MATCH is Redis's
    ("checkout", "SCAN 0 MATCH \\shop:order:*", None),  # an escaped letter is that letter
    ("reports", "SCAN 0", "SCAN 0 MATCH shop:*"),  # one prefix: added
    ("reports", "SCAN 7 COUNT 100", "SCAN 7 COUNT 100 MATCH shop:*"),
    ("reports", "SCAN 0 MATCH shop:product:*", None),
    ("reports", "SCAN 0 MATCH other:*", "K7"),
    ("idle", "SCAN 0 MATCH x*", "K7"),  # applied for nothing
    (None, "SCAN 0", "K7"),
    ("checkout", "RANDOMKEY", "K7"),
    ("checkout", "SELECT 1", "K7"),
    ("checkout", "SELECT 0", "K7"),
    ("checkout", "SWAPDB 0 1", "K7"),
    ("checkout", "MOVE shop:order:1 1", "K7"),
    ("reports", "RANDOMKEY", "K7"),
    (None, "RANDOMKEY", "K7"),
    ("reports", "SORT_RO shop:l BY shop:w:*", None),
    ("reports", "SORT_RO shop:l BY nosort GET # GET shop:o:*->name", None),
    ("reports", "SORT_RO shop:l BY other:*", "K7"),  # reads other:<element>
    ("reports", "SORT_RO shop:l GET # GET other:*->f", "K7"),
    ("reports", "SORT_RO shop:l BY weight", None),  # no `*`: no key read (no sort)
    ("checkout", "SORT shop:cart:l LIMIT 0 10 BY shop:cart:w:* STORE shop:cart:d", None),
    ("checkout", "SORT shop:cart:l ALPHA GET shop:product:*", "K7"),
    ("checkout", "KEYS shop:order:*", None),  # a policy without C2 (and its baseline) allows KEYS...
    ("checkout", "KEYS *", "K7"),  # ...of the application's keys
    # COPY's DB writes into another database, as SELECT would (issue 49)
    ("checkout", "COPY shop:order:1 shop:order:2", None),
    ("checkout", "COPY shop:order:1 shop:order:2 REPLACE", None),
    ("checkout", "COPY shop:order:1 shop:order:2 DB 1", "K7"),
    ("checkout", "COPY shop:order:1 shop:order:2 REPLACE db 0", "K7"),
    # channels are the application's own as its keys are
    ("reports", "PUBSUB CHANNELS", "PUBSUB CHANNELS shop:*"),
    ("reports", "PUBSUB CHANNELS shop:news:*", None),
    ("reports", "PUBSUB SHARDCHANNELS", "PUBSUB SHARDCHANNELS shop:*"),
    ("reports", "PUBSUB CHANNELS *", "K7"),
    ("reports", "PUBSUB SHARDCHANNELS other:*", "K7"),
    ("checkout", "PUBSUB CHANNELS", "K7"),  # two prefixes: one per prefix
    ("checkout", "PUBSUB CHANNELS shop:cart:*", None),
    ("idle", "PUBSUB CHANNELS", "K7"),
    (None, "PUBSUB CHANNELS", "K7"),
    ("reports", "PUBSUB NUMSUB shop:a shop:b", None),
    ("reports", "PUBSUB NUMSUB", None),
    ("reports", "PUBSUB NUMSUB shop:a other:b", "K7"),
    ("checkout", "PUBSUB SHARDNUMSUB shop:order:x", None),
    ("checkout", "PUBSUB SHARDNUMSUB shop:x", "K7"),
    ("reports", "PUBSUB NUMPAT", None),
    # CLIENT TRACKING BCAST: the names of the keys that change under its PREFIXes
    ("reports", "CLIENT TRACKING ON", None),
    ("reports", "CLIENT TRACKING ON OPTIN NOLOOP", None),
    ("reports", "CLIENT TRACKING OFF", None),
    ("reports", "CLIENT TRACKING ON BCAST", "K7"),
    ("reports", "CLIENT TRACKING ON bcast NOLOOP", "K7"),
    ("reports", "CLIENT TRACKING ON BCAST PREFIX shop:a", None),
    ("reports", "CLIENT TRACKING on PREFIX shop:a BCAST PREFIX shop:b NOLOOP", None),
    ("reports", "CLIENT TRACKING ON BCAST PREFIX shop:a PREFIX other:", "K7"),
    ("reports", "CLIENT TRACKING ON BCAST PREFIX sh", "K7"),  # wider than the application's prefix
    ("reports", "CLIENT TRACKING ON REDIRECT 7 BCAST PREFIX shop:", None),
    ("idle", "CLIENT TRACKING ON BCAST PREFIX shop:", "K7"),
    (None, "CLIENT TRACKING ON BCAST", "K7"),
])
def test_own_keys_only(app, command, outcome):
    """What an application reaches beside the keys it names: SCAN, RANDOMKEY, SWAPDB, MOVE,
    SELECT, SORT's BY/GET patterns (issue 14); COPY ... DB, channel names, BCAST (issue 49)."""
    text = POLICY.replace("K2: {style: lowercase}", "K2: off")
    verdict = decide(app, command, text)
    if outcome is None:
        assert verdict is None or (verdict.reject is None and verdict.commands is None), verdict.findings
    elif outcome == "K7":
        assert verdict is not None and verdict.reject is not None and verdict.reject.rule == "K7", verdict
    else:
        assert verdict.reject is None and verdict.commands == [outcome.encode().split()]


@pytest.mark.parametrize("command, refused", [("KEYS shop:order:*", False), ("KEYS *", True),
                                              ("KEYS shop:*", True), ("KEYS shop:cart:[ab]*", False)])
def test_keys_allowed_to_an_application_lists_its_own(command, refused):
    """An application's own C2 (with the baseline) that allows KEYS by name: scoped like SCAN's MATCH."""
    text = POLICY.replace("K2: {style: lowercase}", "K2: off").replace(
        "      T3: {max_ttl: 60}", "      T3: {max_ttl: 60}\n      C2: {allow: [KEYS]}")
    verdict = decide("checkout", command, text)
    assert (verdict is not None and verdict.reject is not None and verdict.reject.rule == "K7") == refused


def test_own_keys_only_advice():
    assert decide("checkout", "SCAN 0").reject.advice == (
        "application 'checkout' may use keys under 'shop:order:', 'shop:cart:' only: one SCAN per prefix: "
        "SCAN <cursor> MATCH shop:order:* or SCAN <cursor> MATCH shop:cart:*")
    assert decide("checkout", "RANDOMKEY").reject.advice.endswith(
        "RANDOMKEY returns any key of the database: SCAN with MATCH <prefix>* instead")
    assert decide(None, "SCAN 0").reject.advice.startswith("a client that is no application owns no key")
    assert decide("checkout", "COPY shop:order:1 shop:order:2 DB 1").reject.advice == (
        "application 'checkout' may use keys under 'shop:order:', 'shop:cart:' only; COPY ... DB writes into "
        "another database: the application's keys live in the proxy's database: use key prefixes, not databases")
    assert decide("checkout", "PUBSUB CHANNELS").reject.advice == (
        "application 'checkout' may use keys under 'shop:order:', 'shop:cart:' only: channels too: one per "
        "prefix: PUBSUB CHANNELS shop:order:* or PUBSUB CHANNELS shop:cart:*")
    assert decide("reports", "PUBSUB NUMSUB shop:a other:b").reject.subject == "channel 'other:b'"
    assert decide("checkout", "CLIENT TRACKING ON BCAST").reject.advice == (
        "application 'checkout' may use keys under 'shop:order:', 'shop:cart:' only; BCAST without PREFIX "
        "broadcasts every key's name: CLIENT TRACKING ON BCAST PREFIX shop:order: PREFIX shop:cart:")
    escaped = engine(POLICY.replace('prefixes: "shop:"', 'prefixes: "sh*p["')).tenants.engine("reports")
    args = [b"SCAN", b"0"]
    assert escaped.decide(escaped.plan_for(args), args).commands == [[b"SCAN", b"0", b"MATCH", b"sh\\*p\\[*"]]


def test_advice_names_the_application_and_its_prefixes():
    assert decide("checkout", "GET shop:x:1").reject.advice == (
        "application 'checkout' may use keys under 'shop:order:', 'shop:cart:' only; apply for a new "
        "prefix with the operators")
    assert decide("reports", "SET shop:x:1 v").reject.advice == (
        "application 'reports' is read-only; ask the operators for write access")
    assert "authenticate as the application" in decide(None, "GET k").reject.advice


def _writes(spec) -> bool:
    return "write" in spec.acl_categories or any(not WRITE_KEY_FLAGS.isdisjoint(ks.flags) for ks in spec.key_specs)


@pytest.mark.parametrize("spec", [s for s in table().walk() if s.has_keys and "|" not in s.name],
                         ids=lambda spec: spec.name)
def test_read_only_follows_the_command_table(spec):
    """Every command with keys: a read-only application may run it exactly when the command
    table says it does not write (the @write category, or a key spec that changes keys)."""
    rules = engine().tenants.engine("reports").plan_for([spec.name.encode()]).command_rules or ()
    assert any(isinstance(rule, ReadOnly) for rule in rules) == _writes(spec)
    if "read" in spec.acl_categories and not _writes(spec):
        assert not any(isinstance(rule, ReadOnly) for rule in rules)


def test_anonymous_allow_leaves_clients_that_are_no_application_alone():
    text = POLICY.replace("anonymous: reject", "anonymous: allow")
    assert decide(None, "GET anything:1", text) is None
    assert decide("checkout", "GET anything:1", text).reject.rule == "K7"


@pytest.mark.parametrize("text, mode", [
    (POLICY.replace("name: shop", "name: shop\nmode: audit"), AUDIT),  # the whole policy dry-runs
    (POLICY.replace("K2: off", "K2: off\n      K7: audit"), AUDIT),  # checkout's own K7 in audit
    (POLICY, ENFORCE),
])
def test_k7_modes(text, mode):
    verdict = decide("checkout", "GET other:1", text)
    assert [finding.rule for finding in verdict.findings] == ["K7"]
    assert verdict.findings[0].mode == mode
    assert (verdict.reject is None) == (mode == AUDIT)


def test_k7_off_compiles_the_namespace_out():
    text = POLICY.replace("K7: {anonymous: reject}", "K7: off")
    assert decide("checkout", "GET other:1", text) is None
    assert decide("reports", "SET shop:x:1 v EX 30", text) is None


# -- per-application overrides ---------------------------------------------------------------

@pytest.mark.parametrize("app, command, rule", [
    ("checkout", "SET shop:order:1 v EX 60", None),
    ("checkout", "SET shop:order:1 v EX 61", "T3"),  # its own max_ttl
    ("checkout", "SET shop:order:1 v EX 4", "T3"),  # the policy's min_ttl, merged in
    ("checkout", "SET shop:order:Big v EX 30", None),  # its own K2: off
    ("idle", "SET shop:order:1 v EX 61", "K7"),
    (None, "SET Shop:1 v EX 30", "K2"),
])
def test_overrides_merge_over_the_policy_rules(app, command, rule):
    verdict = decide(app, command)
    fired = None if verdict is None or verdict.reject is None else verdict.reject.rule
    assert fired == rule


def test_without_applications_nothing_changes():
    plain = engine("rules:\n  K2: {style: lowercase}\n")
    assert plain.tenants is None
    assert not any(rule.id == "K7" for rule in plain.policy.rules)


# -- the command line ---------------------------------------------------------------------------

EXAMPLE = "configs/policies/applications.yaml"


def run_cli(*args: str, stdin: str = "") -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "proxy", *args], input=stdin, capture_output=True,
                          text=True, cwd=REPO, timeout=60)


def test_hash_password_reads_stdin():
    done = run_cli("policy", "hash-password", stdin="checkout-secret\n")
    assert done.returncode == 0
    stored = done.stdout.strip()
    assert PasswordHash.parse(stored).matches(b"checkout-secret") and "checkout-secret" not in stored
    assert run_cli("policy", "hash-password", stdin="").returncode == 1


def test_example_policy_passwords():
    """The example's documented passwords are the ones its hashes were made from."""
    policy = load_policy_text(open(os.path.join(REPO, EXAMPLE), encoding="utf-8").read())
    passwords = {"checkout": b"checkout-secret", "catalog": b"catalog-secret", "reports": b"reports-secret"}
    assert {app.name: app.password.matches(passwords[app.name]) for app in policy.applications} == \
        dict.fromkeys(passwords, True)


@pytest.mark.parametrize("app, command, decision", [
    ("catalog", "SET shop:product:1 v EX 100000", "rule T3"),
    ("catalog", "SET shop:product:1 v EX 100", "decision: allowed"),
    ("reports", "SET shop:product:1 v EX 100", "'reports' is read-only"),
    ("checkout", "GET shop:product:1", "application 'checkout' may use keys under"),
    (None, "GET shop:order:1", "authenticate as the application"),
])
def test_explain_as_an_application(app, command, decision):
    done = run_cli("policy", "explain", *(["--app", app] if app else []), EXAMPLE, "--", *command.split())
    rejected = not decision.startswith("decision: allowed")
    assert done.returncode == (1 if rejected else 0) and decision in done.stdout, done


def test_check_lists_the_applications():
    done = run_cli("policy", "check", EXAMPLE)
    assert done.returncode == 0
    assert "application 'catalog' (user catalog-svc): prefixes shop:product:, shop:category:" in done.stdout
    assert "application 'reports' (user reports): prefixes shop:, read-only" in done.stdout
