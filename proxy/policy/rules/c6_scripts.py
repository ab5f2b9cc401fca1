"""C6: server-side scripts must not be a way around the rules.

Inside a script the proxy sees nothing; Redis's ACL (the users the proxy creates, `policy/acl.py`)
keeps a script to the allowed commands and the application's prefixes, but cannot check key
names, TTLs or sizes. So `scripts:` says which scripts run:

* `approved` (every shipped preset): only the scripts of the library, reviewed like code. `library:
  DIR` (relative to the policy file) holds one approved script per `.lua` file and function
  libraries (`#!lua name=...`); the built-in library (`_scripts.BUILTIN_DIR`: the client
  libraries' lock scripts) is always approved too. EVAL of an approved body, EVALSHA of an
  approved SHA, FCALL of a function of an approved library, SCRIPT LOAD of an approved body run
  (and SCRIPT EXISTS of approved SHAs is answered);
  every other EVAL*/FCALL*/SCRIPT LOAD is refused, and so are SCRIPT FLUSH/DEBUG and FUNCTION
  LOAD/DELETE/FLUSH/RESTORE (the library is the operators'). EVALSHA of an approved SHA is sent as
  EVAL of its body: Redis runs it from its script cache all the same, and a script cache emptied
  (a restart, SCRIPT FLUSH, a failover, a cluster master that never saw SCRIPT LOAD) never shows
  the client a NOSCRIPT. The proxy also loads the library upstream at start and on every reload
  (`upstream_scripts.py`: SCRIPT LOAD, FUNCTION LOAD REPLACE on every master). `read_only: allow`
  lets EVAL_RO/EVALSHA_RO/FCALL_RO run any script (Redis refuses writes in them, ACL keeps them to
  the prefixes); `approved` (the default) treats them like the others. The declared keys of an
  approved script pass the key rules like any key, and `policy check` reviews each script
  (`_scripts.review`).
* `declared`: any script runs; the keys it declares (`numkeys` keys, found by the command table's
  key specs) pass every key rule, but what it writes elsewhere, its TTLs and sizes are unchecked.
  When `numkeys` is not a valid count no key is found and Redis answers with its own error.
* `deny`: every command of Redis's `@scripting` ACL category is refused: running code (EVAL*,
  FCALL*), installing it (SCRIPT LOAD, FUNCTION LOAD/RESTORE) and managing it.

The other half of C6 (destination keys checked like source keys, every command inside MULTI
checked as it is queued) is the engine's: key rules run on every key the key specs find, and the
session hands queued commands to the engine one by one.
"""

from __future__ import annotations

from pathlib import Path

from ..base import PolicyError, RewriteRule, register
from ._commands import command_words
from ._scripts import BUILTIN_DIR, Library, LibraryError, load_library

ADVICE = ("this policy allows no server-side scripts: send the commands themselves "
          "(inside MULTI/EXEC if they must run together)")
APPROVE = ("this policy runs approved scripts only: add the script's .lua file to the policy's C6 "
           "library directory, have it reviewed (redis-guard policy check), and reload the policy")
OPERATORS = "the approved scripts and functions are loaded by the proxy from the policy's C6 library"

RUNS = {"eval": "body", "evalsha": "sha", "fcall": "function",
        "eval_ro": "body", "evalsha_ro": "sha", "fcall_ro": "function"}
READ_ONLY = frozenset({"eval_ro", "evalsha_ro", "fcall_ro"})
# Under `approved`: refused whatever their arguments (the library is the operators').
MANAGING = frozenset({"script|flush", "script|debug", "function|load", "function|delete", "function|flush",
                      "function|restore"})


@register
class ScriptsWithinTheRules(RewriteRule):
    id = "C6"
    order = 104
    title = "no scripts"
    checks_on_server = True  # EVALSHA sent as EVAL is how approved scripts always run, not a change

    def __init__(self, settings):
        super().__init__(settings)
        self.scripts = settings.get("scripts", "declared", kind=str, choices=("approved", "declared", "deny"))
        self.library_setting = settings.get("library", None, kind=str)
        self.library_line = settings.lines.get("library", settings.line)
        self.read_only = settings.get("read_only", "approved", kind=str, choices=("approved", "allow"))
        self.library = Library()
        if self.scripts == "declared":
            self.title = "scripts with declared keys"
        elif self.scripts == "approved":
            self.title = "approved scripts only"
            self.library = _cached_library((str(BUILTIN_DIR),))
            self.server_commands = frozenset({"eval", "eval_ro"})  # an approved EVALSHA is sent as EVAL
        if self.library_setting is not None and self.scripts != "approved":
            settings.problem("library", "'library' is for 'scripts: approved'")

    def use_source(self, source: str | None) -> None:
        """The policy file's path, which `library:` is relative to."""
        if self.scripts != "approved" or self.library_setting is None:
            return
        base = Path(source).parent if source else Path(".")
        directory = Path(self.library_setting)
        if not directory.is_absolute():
            directory = base / directory
        try:
            self.library = _cached_library((str(BUILTIN_DIR), str(directory)), fresh=True)
        except LibraryError as exc:
            raise PolicyError(f"rule C6: {exc}", self.library_line) from None

    def applies_to(self, spec) -> bool:
        if self.scripts == "declared" or "scripting" not in spec.acl_categories:
            return False
        if self.scripts == "deny":
            return True
        if spec.name in READ_ONLY and self.read_only == "allow":
            return False
        return spec.name in RUNS or spec.name in MANAGING or spec.name in ("script|load", "script|exists")

    def denies(self, spec) -> bool:
        if self.scripts == "deny":
            return self.applies_to(spec)
        return self.scripts == "approved" and spec.name in MANAGING

    def check(self, call):
        if self.scripts == "deny":
            return self.finding(f"command {command_words(call.name)}", ADVICE)
        name, args = call.name, call.args
        what = RUNS.get(name)
        if what is None:
            if name == "script|load" and len(args) > 2 and args[2] in self.library.bodies:
                return None
            if name == "script|load":
                return self.finding("command SCRIPT LOAD of a script that is not approved", APPROVE)
            if name == "script|exists":  # asked of approved scripts only
                unknown = [sha for sha in args[2:] if sha.lower() not in self.library.scripts]
                if not unknown:
                    return None
                return self.finding(f"command SCRIPT EXISTS of SHA {_short(unknown[0])}, not an approved script",
                                    APPROVE)
            return self.finding(f"command {command_words(name)}", OPERATORS)
        if len(args) < 2:
            return None  # Redis answers with its arity error
        subject = args[1]
        if what == "body":
            if subject in self.library.bodies:
                return None
            return self.finding(f"command {command_words(name)} of a script that is not approved", APPROVE)
        if what == "sha":
            if subject.lower() in self.library.scripts:
                return None
            return self.finding(f"command {command_words(name)} of SHA {_short(subject)}, not an approved "
                                "script", APPROVE)
        if subject in self.library.functions:
            return None
        return self.finding(f"command {command_words(name)} of function '{_short(subject)}', not in an "
                            "approved library", APPROVE)

    def rewrite(self, call):
        name = call.name
        if name != "evalsha" and name != "evalsha_ro":
            return None
        args = call.args
        # (under `deny` the library is empty: nothing is rewritten, the check refuses)
        script = self.library.scripts.get(args[1].lower()) if len(args) > 1 else None
        if script is None:
            return None
        return [[b"EVAL" if name == "evalsha" else b"EVAL_RO", script.body, *args[2:]]]

    def describe(self) -> str:
        if self.scripts == "deny":
            return "deny scripts and functions (@scripting)"
        if self.scripts == "approved":
            library = self.library
            read_only = "; EVAL_RO/FCALL_RO of any script" if self.read_only == "allow" else ""
            where = f" from {library.directories[-1]}" if len(library.directories) > 1 else " (built-in only)"
            return (f"only the {len(library.scripts)} approved scripts and {len(library.functions)} functions"
                    f"{where}{read_only}; their declared keys pass the key rules")
        return ("scripts and functions only with declared keys, which the key rules check (what a script "
                "writes inside is unchecked: use scripts: approved)")


def _short(value: bytes, limit: int = 48) -> str:
    text = value.decode("utf-8", "backslashreplace")
    return text if len(text) <= limit else text[:limit] + "..."


_CACHE: dict[tuple, tuple] = {}


def _cached_library(directories: tuple[str, ...], fresh: bool = False) -> Library:
    """The library of `directories`; the built-in one is read once, a policy's own on every
    load (a reload must see the files as they are now)."""
    if not fresh and directories in _CACHE:
        return _CACHE[directories][0]
    library = load_library(directories)
    if not fresh:
        _CACHE[directories] = (library,)
    return library
