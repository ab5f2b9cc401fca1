"""The policy engine: per command, the ordered chain of rules compiled for it, and a verdict.

Theory of operation: at policy load the engine walks the command table once and compiles, for
every command, a `Plan`: the command rules whose `applies_to` accepts it, whether its keys are
checked, and the rewrite rules that may change it. Commands with nothing to check have no plan,
so the proxy's cost for them is one failed dict lookup. All key-name rules are folded into one
compiled regex of lookaheads: a conforming key costs one `match` the first time its class is
seen (`keyclass`: the bytes no rule's pattern tells apart, so `user:1:name` stands for every
`user:<digits>:name`), then one lookup; only a failing key runs the rules one by one to say which
fired. `decide` returns None (forward unchanged) or a `Verdict`. No I/O here; the server applies
verdicts.

The memo of passes: when every rule of a plan says which argument bytes its verdict reads
(`CommandRule.reads_from`), a command that passed is remembered by its shape: the key, the
lengths of the arguments no rule reads, and the bytes of the ones they do (`SET k <3 bytes>
EX 3600`). The key is held by its class when every rule of the plan says through which patterns
it reads keys (`CommandRule.key_patterns`), else as it is. The next command of that shape passes
with one tuple and one lookup, whatever its value: applications write keys of the same few
classes with the same options again and again. Calls that looked at the rest of the pipeline or
at the clock, and transactions, are always decided.
"""

from __future__ import annotations

import re

from ..commands.keyspecs import GETKEYS_PROCS, find_keys
from .applications import Tenants
from .base import AUDIT, ENFORCE, NO_ARGUMENTS, OFF, CommandRule, Finding, KeyRule, RewriteRule
from .decision import KeyFinding, SessionState
from .keyclass import class_table
from .loader import PASSTHROUGH, Policy
from .memo import Memo
from .refusals import LATER
from .refusals import make as make_refusal


class Call:
    """One command under decision, with what rules may need to know around it."""

    __slots__ = ("args", "spec", "name", "keys", "_later", "state", "commands", "memo", "volatile", "engine")

    def __init__(self, args, spec, name, keys, later, state, commands=None, engine=None):
        self.memo = None  # the TTL arguments, worked out once for the TTL rules (rules/_ttl.call_ttl_args)
        self.args = args
        self.spec = spec
        self.name = name  # lower case; 'client|kill' for subcommands
        self.keys = keys  # [(argument index, KeySpec)]
        self._later = later
        self.state = state  # the session's SessionState (transactions, protocol)
        self.commands = commands  # in a rewrite chain: all the earlier rules send (args is [0])
        self.volatile = False  # the verdict depends on more than the arguments: not memoized
        self.engine = engine  # the engine deciding: rules ask it about later commands (T1)

    @property
    def later(self):
        """The commands after this one in the same pipeline."""
        if not self.volatile:
            self.volatile = LATER  # (the memo of refusals may ask the rules again: refusals.py)
        return self._later

    def key_names(self) -> list[bytes]:
        args = self.args
        return [args[index] for index, _ in self.keys]


class Verdict:
    """`reject`: the finding to answer with (nothing is forwarded). `commands`: what to send
    instead (the first one's reply is the client's; the others' are hidden). `findings`: every
    rule that fired, enforced or audited, for logs and metrics. `more`: (finding, count) pairs,
    a rule's findings on the keys past the first `Engine.EXPLAINED_KEYS` failing ones of the
    command, counted rather than explained one by one (the finding is one of them, a sample)."""

    __slots__ = ("reject", "commands", "findings", "rewritten_by", "more")

    def __init__(self, reject=None, commands=None, findings=(), rewritten_by=(), more=()):
        self.reject = reject
        self.commands = commands
        self.findings = findings
        self.rewritten_by = rewritten_by  # the rewrite rules that changed the command
        self.more = more


class Plan:
    __slots__ = ("spec", "command_rules", "rewrite_rules", "check_keys", "simple_key", "keys_only",
                 "first_key", "memo", "memo_from", "shape", "shapes", "key_classes", "memo_check", "refusals")

    def __init__(self, spec, command_rules, rewrite_rules, check_keys, key_patterns=()):
        self.spec = spec
        self.command_rules = command_rules
        self.rewrite_rules = rewrite_rules
        self.check_keys = check_keys
        specs = spec.key_specs
        self.simple_key = spec.key_at_first_argument  # skips the key-spec interpreter
        # The key of argument 1 with its documented spec: what find_keys would say, for free.
        self.first_key = (((1, specs[0]),) if self.simple_key and "VARIABLE_FLAGS" not in specs[0].flags
                          else None)
        # Only the name of argument 1 to check: the server does it inline with one match.
        self.keys_only = self.simple_key and check_keys and not command_rules and not rewrite_rules
        # key -> the shape of the commands on it that passed (the module's docstring), or a
        # frozenset of them when there are several
        self.memo = None
        self.memo_from = NO_ARGUMENTS  # the first argument whose bytes are part of the shape
        self.shapes = None  # every shape once, shared by the keys: compared in cache, not in memory
        self.shape = None
        self.key_classes = None  # the memo's keys are the key's class (`keyclass`) when the rules allow
        # Did a command of this shape on a key of this class pass before? `memo_check.passed(args,
        # session state)` (session/guard.py)
        self.memo_check = None
        # (key class, *shape) -> the `refusals.Refusal` of the commands of that shape refused before
        self.refusals = None
        if self.simple_key and (command_rules or rewrite_rules):
            starts = [rule.reads_from(spec) for rule in (*command_rules, *rewrite_rules)]
            if "VARIABLE_FLAGS" in specs[0].flags:  # SET ... GET: the flags come from the options
                proc = GETKEYS_PROCS.get(spec.name)
                starts.append(proc.reads_from if proc is not None else None)
            if None not in starts:
                self.memo = {}
                self.shapes = {}
                self.memo_from = min(starts)
                self.shape = _shape_of(self.memo_from)
                reads = [rule.key_patterns(spec) for rule in (*command_rules, *rewrite_rules)]
                if None not in reads:
                    self.key_classes = class_table([*key_patterns, *(p for each in reads for p in each)])
                self.refusals = {}
                self.memo_check = Memo(self.memo, self.key_classes, self.shape, self.memo_from, self.refusals)


def _shape_of(start: int):
    """What a verdict depends on besides the key at argument 1: the lengths of the arguments
    before `start`, the bytes of the others. The commonest shapes get a function of their own."""
    if start <= 2:
        return lambda args: tuple(args[2:])
    if start == 3:  # SET k v [options]: the value's length, the options (compared in place: session/guard.py)
        return lambda args: (len(args[2]), *args[3:]) if len(args) > 2 else ()
    return lambda args: (*map(len, args[2:start]), *args[start:])


def _effective(rule, policy_mode: str):
    mode = rule.mode
    if mode == ENFORCE and policy_mode == AUDIT:
        return AUDIT
    return mode


class Engine:
    def __init__(self, policy: Policy, table):
        self.policy = policy
        self.table = table
        active = [rule for rule in policy.rules if rule.mode != OFF]
        self.modes = {rule.id: _effective(rule, policy.mode) for rule in active}
        self.key_rules = [rule for rule in active if isinstance(rule, KeyRule)]
        # A rewrite rule may reject too (C3): it is checked when it has a check of its own.
        self.command_rules = [rule for rule in active if isinstance(rule, CommandRule) and (
            not isinstance(rule, RewriteRule) or type(rule).check is not RewriteRule.check)]
        self.rewrite_rules = [rule for rule in active if isinstance(rule, RewriteRule)]
        self.key_match = None
        self.good_keys: dict[bytes, bool] = {}  # classes of names that passed every key rule (bounded)
        self.bad_keys: dict[bytes, tuple] = {}  # classes of names that failed -> the key rules they fail (bounded)
        self.memo_size = 0  # keys in all the plans' memos
        self.refusals_size = 0  # entries in all the plans' memos of refusals
        self.subcommand_plans: dict[str, Plan] = {}  # 'xgroup|create' -> its plan, made on first use
        patterns = [rule.pattern for rule in self.key_rules if rule.pattern]
        # Each key rule's own match, for the failing keys that are counted rather than explained.
        self.rule_matches = tuple((rule, re.compile(f"(?:{rule.pattern})\\Z".encode(), re.S).match)
                                  for rule in self.key_rules if rule.pattern)
        if patterns:
            combined = "".join(f"(?=(?:{pattern})\\Z)" for pattern in patterns)
            self.key_match = re.compile(combined.encode(), re.S).match
        self.key_patterns = tuple(pattern.encode() for pattern in patterns)
        self.key_classes = class_table(self.key_patterns)  # `keyclass`; None keeps keys as they are
        # One engine per application, compiled now (this one is for clients that are none).
        self.tenants = Tenants(policy, table, Engine) if policy.applications else None
        self.plans: dict[bytes, Plan] = {}
        for spec in table:
            plan = self._compile(spec)
            if plan is not None:
                for name in (spec.name, spec.name.upper()):
                    self.plans[name.encode()] = plan

    def _compile(self, spec) -> Plan | None:
        specs = [spec, *spec.subcommands.values()] if spec.subcommands else [spec]
        if len(specs) > 1:
            # A container: the plan resolves the subcommand per call.
            if not any(self._rules_for(sub)[0] or self._rules_for(sub)[1] or
                       (self.key_match is not None and sub.has_keys) for sub in specs):
                return None
            return Plan(spec, None, None, self.key_match is not None)
        command_rules, rewrite_rules = self._rules_for(spec)
        check_keys = self.key_match is not None and spec.has_keys
        if not command_rules and not rewrite_rules and not check_keys:
            return None
        return Plan(spec, tuple(command_rules), tuple(rewrite_rules), check_keys, self.key_patterns)

    def _rules_for(self, spec):
        return ([rule for rule in self.command_rules if rule.applies_to(spec)],
                [rule for rule in self.rewrite_rules if rule.applies_to(spec)])

    # -- per command ------------------------------------------------------------------------

    GOOD_KEYS_MAX = 1 << 17
    MEMO_MAX = 1 << 17  # keys remembered, all plans together
    MEMO_SHAPES = 4  # shapes remembered per key and plan (then it starts again)
    MEMO_BYTES = 512  # the most argument bytes a remembered shape may hold, its key included
    REFUSALS_MAX = 1 << 14  # refusals remembered, all plans together (refusals.py)

    def key_ok(self, key: bytes) -> bool:
        """Does this name pass every key rule? A lookup for names of a class seen before
        (`keyclass`: `user:1:name` stands for every `user:<digit>:name`), else one compiled match."""
        good = self.good_keys
        key_class = key.translate(self.key_classes)
        if key_class in good:
            return True
        if self.key_match(key) is None:
            return False
        if len(good) >= self.GOOD_KEYS_MAX:
            good.clear()  # cheaper than LRU bookkeeping on every hit
        good[key_class] = True
        return True

    def decide(self, plan: Plan, args: list[bytes], later=(), state: SessionState | None = None) -> Verdict | None:
        if plan.command_rules is None:  # container: resolve the subcommand now
            spec = self.table.lookup(args)
            if spec is None or spec is plan.spec:
                return None
            plan = self.subcommand_plans.get(spec.name)
            if plan is None:
                command_rules, rewrite_rules = self._rules_for(spec)
                plan = self.subcommand_plans[spec.name] = Plan(
                    spec, tuple(command_rules), tuple(rewrite_rules), self.key_match is not None and spec.has_keys,
                    self.key_patterns)
        spec = plan.spec
        findings = None
        more = None
        found_keys = None  # the keys the key check found, for the rules' Call (found once)
        if plan.check_keys and self.key_match is not None:
            if plan.simple_key:
                if len(args) > 1 and not self.key_ok(args[1]):
                    findings = self._explain_key(args[1])
            else:
                failed = 0
                counted = None  # past the explained keys: class of failing names -> [first key, count]
                table = self.key_classes
                found_keys = find_keys(spec, args)
                for index, _ in found_keys:
                    key = args[index]
                    if counted is not None:
                        seen = counted.get(key.translate(table))
                        if seen is not None:
                            seen[1] += 1
                            continue
                    if not self.key_ok(key):
                        failed += 1
                        if failed > self.EXPLAINED_KEYS:
                            if counted is None:
                                counted = {}
                            counted[key.translate(table)] = [key, 1]
                            continue
                        found = self._explain_key(key)
                        if findings is None:
                            findings = found
                        else:
                            findings.extend(found)  # (in place: a command of many bad keys stays linear)
                if counted is not None:
                    more = self._count_rules(counted)
        call = None
        if plan.command_rules:
            if plan.first_key is not None and len(args) > 1:
                keys = plan.first_key
            elif found_keys is not None:
                keys = found_keys
            else:
                keys = find_keys(spec, args) if spec.has_keys else []
            call = Call(args, spec, spec.name, keys, later, state or SessionState(), None, self)
            for rule in plan.command_rules:
                found = rule.check(call)
                if found is not None:
                    if findings is None:
                        findings = [found]
                    else:
                        findings.append(found)
        commands = None
        rewriters = ()
        if plan.rewrite_rules:
            if call is None:
                call = Call(args, spec, spec.name, find_keys(spec, args), later, state or SessionState(), None, self)
            elif call.keys is None:
                call.keys = find_keys(spec, args)
            for rule in plan.rewrite_rules:
                mode = self.modes[rule.id]
                if mode != ENFORCE:
                    if mode == AUDIT and not rule.checks_on_server:
                        # audit mode counts the rewrites it does not do (DEL that would be UNLINK)
                        unapplied = rule.rewrite(call)
                        if unapplied is not None:
                            found = rule.would_rewrite(call.name, unapplied)
                            if findings is None:
                                findings = [found]
                            else:
                                findings.append(found)
                    continue
                rewritten = rule.rewrite(call)
                if rewritten is not None:
                    commands = rewritten
                    rewriters += (rule,)
                    call = Call(rewritten[0], spec, spec.name, call.keys, later, call.state, rewritten, self)
        if findings is None and commands is None:
            if plan.memo is not None and (call is None or not call.volatile):
                self._remember(plan, args, state)
            return None
        reject = None
        if findings:
            findings = [self.with_mode(finding) for finding in findings]
            reject = next((finding for finding in findings if finding.mode == ENFORCE), None)
            if reject is not None and plan.refusals is not None and more is None:
                self._remember_refusal(plan, args, findings, reject, call, state)
        if more is not None:
            more = tuple((self._sample(rule, key, findings), count) for rule, (key, count) in more.items())
            if reject is None:
                reject = next((finding for finding, _ in more if finding.mode == ENFORCE), None)
        return Verdict(reject, None if reject else commands, tuple(findings or ()), rewriters, more or ())

    def _remember(self, plan: Plan, args, state) -> None:
        if len(args) < 2 or (state is not None and state.in_multi):
            return
        if len(args[1]) + sum(map(len, args[plan.memo_from:])) > self.MEMO_BYTES:
            return  # a shape holding a big key or option would cost more memory than it saves
        key = args[1].translate(plan.key_classes)
        known = plan.memo.get(key)
        if known is None:
            if self.memo_size >= self.MEMO_MAX:
                for each in {*self.plans.values(), *self.subcommand_plans.values()}:
                    if each.memo:
                        each.memo.clear()
                self.memo_size = 0
            self.memo_size += 1
            if len(plan.shapes) >= self.MEMO_MAX:
                plan.shapes.clear()
        shape = plan.shape(args)
        shape = plan.shapes.setdefault(shape, shape)
        if known is None or (type(known) is frozenset and len(known) >= self.MEMO_SHAPES):
            plan.memo[key] = shape
        else:
            plan.memo[key] = frozenset((known, shape) if type(known) is tuple else (*known, shape))

    def _remember_refusal(self, plan: Plan, args, findings, reject, call, state) -> None:
        if len(args) < 2 or (state is not None and state.in_multi):
            return
        if len(args[1]) + sum(map(len, args[plan.memo_from:])) > self.MEMO_BYTES:
            return
        refusal = make_refusal(self, plan, args, findings, reject, call)
        if refusal is None:
            return
        if self.refusals_size >= self.REFUSALS_MAX:
            for each in {*self.plans.values(), *self.subcommand_plans.values()}:
                if each.refusals:
                    each.refusals.clear()
            self.refusals_size = 0
        key = (args[1].translate(plan.key_classes), *plan.shape(args))
        if key not in plan.refusals:
            self.refusals_size += 1
        plan.refusals[key] = refusal

    def refusal(self, plan: Plan, args):
        """The remembered refusal of `args` (outside a transaction, whatever the rest of its
        pipeline), or None: decide it (`refusals`). (session/verdicts.py has it inline.)"""
        refusals = plan.refusals
        if not refusals or len(args) < 2:
            return None
        return refusals.get((args[1].translate(plan.key_classes), *plan.shape(args)))

    def with_mode(self, finding: Finding) -> Finding:
        mode = self.modes.get(finding.rule, finding.mode)
        if mode == finding.mode or finding.mode == AUDIT:  # a rule's own audit finding (C3 warn) stays one
            return finding
        return Finding(finding.rule, finding.title, finding.subject, finding.advice, mode)

    # A command's failing keys explained one by one (a finding each, with its advice), the rest
    # counted by rule: explaining costs tens of microseconds a key, and one MGET of a million bad
    # names must not hold the event loop for half a minute.
    EXPLAINED_KEYS = 100

    def _failing(self, key: bytes) -> tuple:
        """The key rules whose own match `key` fails, by its class (a lookup for a class seen
        failing before)."""
        key_class = key.translate(self.key_classes)
        bad = self.bad_keys
        rules = bad.get(key_class)
        if rules is None:
            rules = tuple(rule for rule, match in self.rule_matches if match(key) is None)
            if len(bad) >= self.GOOD_KEYS_MAX:
                bad.clear()
            bad[key_class] = rules
        return rules

    def _count_rules(self, counted: dict) -> dict:
        """rule -> [first key, count] for the failing names counted by class (`decide`): each
        class's rules are each rule's own match on its first key, once."""
        more = {}
        for key, count in counted.values():
            for rule, match in self.rule_matches:
                if match(key) is None:
                    seen = more.get(rule)
                    if seen is None:
                        more[rule] = [key, count]
                    else:
                        seen[1] += count
        return more

    def _sample(self, rule, key: bytes, findings) -> Finding:
        """A finding of `rule` standing for its counted ones: the first explained, else `key`'s."""
        for finding in findings or ():
            if finding.rule == rule.id:
                return finding
        text = key.decode("utf-8", "surrogateescape")
        found = rule.check_key(text) or rule.finding(f"key '{text}'", rule.describe())
        return self.with_mode(found)

    def _explain_key(self, key: bytes) -> list[Finding]:
        text = key.decode("utf-8", "surrogateescape")  # rules see the exact bytes
        rules = self._failing(key)
        if rules:  # (advice when asked for: KeyFinding)
            modes = self.modes
            return [KeyFinding(rule, text, modes.get(rule.id, rule.mode)) for rule in rules]
        found = []
        for rule in self.key_rules:
            finding = rule.check_key(text)
            if finding is not None:
                found.append(finding)
        if not found:  # a pattern and its check_key disagree: name the rules whose pattern failed
            for rule in self.key_rules:
                if rule.pattern and re.fullmatch(rule.pattern.encode(), key, re.S) is None:
                    found.append(rule.finding(f"key '{text}'", rule.describe()))
        return found

    def passes(self, args: list[bytes], protocol: int = 2) -> bool:
        """Would this command, sent alone, be forwarded rather than rejected? For rules that pass
        a command on the strength of a later one (T1): the later one must pass too."""
        plan = self.plan_for(args)
        if plan is None:
            return True
        state = SessionState()
        state.protocol = protocol
        verdict = self.decide(plan, args, (), state)
        return verdict is None or verdict.reject is None

    def plan_for(self, args: list[bytes]) -> Plan | None:
        name = args[0]
        plan = self.plans.get(name)
        if plan is None and name != name.lower():
            plan = self.plans.get(name.lower())
        return plan


def passthrough_engine(table) -> Engine:
    return Engine(PASSTHROUGH, table)
