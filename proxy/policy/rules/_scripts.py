"""C6's approved scripts: the library directories read into one set, and their static review.

A library directory holds one approved script per `.lua` file (the file's bytes are the script's
body, exactly: its SHA1 is what EVALSHA names) and function libraries (a `.lua` file whose first
line is `#!lua name=<library>`, loaded with FUNCTION LOAD REPLACE; the functions it registers
are the ones FCALL may call). `BUILTIN_DIR` (the client libraries' own scripts: redis-py's lock)
is approved under every `scripts: approved` policy, besides the policy's own `library:`.
`load_library` reads the directories into a `Library`; `review` reads every script's
`redis.call`/`redis.pcall` against a policy (`policy check`): a command the policy refuses
whatever its arguments is an error, a computed command name, a key not taken from `KEYS[...]`
and a write with no TTL where T1 applies are warnings, each with its file and line. Sans-IO
besides reading the files.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from pathlib import Path

from ._ttl import may_create

BUILTIN_DIR = Path(__file__).resolve().parents[1] / "data" / "scripts"
MAX_SCRIPT_BYTES = 1 << 20  # a library file bigger than this is a mistake, not a script

_LIBRARY_HEADER = re.compile(rb"#!lua\b[^\n]*\bname=([A-Za-z0-9_]+)")
# redis.register_function('name', ...) and redis.register_function{function_name='name', ...}
_REGISTERED = re.compile(
    rb"""redis\.register_function\s*(?:\(\s*|\{[^}]*?function_name\s*=\s*)(['"])([^'"\n]+)\1""")


@dataclass(frozen=True)
class Script:
    path: str
    body: bytes
    sha: bytes  # lower-case hex, as EVALSHA names it


@dataclass(frozen=True)
class FunctionLibrary:
    path: str
    name: str
    code: bytes
    functions: tuple[bytes, ...]


@dataclass
class Library:
    """Every approved script and function library of a policy."""

    scripts: dict[bytes, Script] = field(default_factory=dict)  # sha -> script
    bodies: dict[bytes, bytes] = field(default_factory=dict)  # body -> sha
    by_name: dict[str, bytes] = field(default_factory=dict)  # file name (with and without .lua) -> sha
    libraries: list[FunctionLibrary] = field(default_factory=list)
    functions: dict[bytes, str] = field(default_factory=dict)  # function name -> library name
    directories: tuple[str, ...] = ()

    def sha_of(self, name: str) -> bytes | None:
        """The SHA of the approved script in file `name` (for `policy test` fixtures)."""
        return self.by_name.get(name)


class LibraryError(Exception):
    pass


def load_library(directories) -> Library:
    """The approved set of `directories` (in order; a later file of the same name adds its own)."""
    library = Library(directories=tuple(str(d) for d in directories))
    for directory in directories:
        path = Path(directory)
        if not path.is_dir():
            raise LibraryError(f"'library': {directory} is not a directory")
        for file in sorted(path.glob("*.lua")):
            try:
                data = file.read_bytes()
            except OSError as exc:
                raise LibraryError(f"'library': {file}: {exc.strerror or exc}") from None
            if len(data) > MAX_SCRIPT_BYTES:
                raise LibraryError(f"'library': {file} is larger than {MAX_SCRIPT_BYTES} bytes")
            header = _LIBRARY_HEADER.match(data)
            if data.startswith(b"#!"):
                if header is None:
                    raise LibraryError(f"'library': {file}: a function library starts with '#!lua name=<library>'")
                functions = tuple(match[2] for match in _REGISTERED.finditer(data))
                if not functions:
                    raise LibraryError(f"'library': {file}: the library registers no function "
                                       "(redis.register_function('name', ...))")
                name = header[1].decode()
                for function in functions:
                    if function in library.functions:
                        raise LibraryError(f"'library': {file}: function '{function.decode()}' is registered "
                                           f"by library '{library.functions[function]}' too")
                    library.functions[function] = name
                library.libraries.append(FunctionLibrary(str(file), name, data, functions))
                continue
            sha = hashlib.sha1(data).hexdigest().encode()
            script = Script(str(file), data, sha)
            library.scripts[sha] = script
            library.bodies[data] = sha
            library.by_name[file.name] = sha
            library.by_name[file.stem] = sha
    return library


# -- static review -------------------------------------------------------------------------------

ERROR, WARNING = "error", "warning"

_CALL = re.compile(r"redis\s*\.\s*p?call\s*\(")
_STRING = re.compile(r"""\s*(['"])([^'"\n]*)\1\s*""")
_EXPIRES = {"expire", "pexpire", "expireat", "pexpireat", "setex", "psetex"}
_TTL_WORDS = {"ex", "px", "exat", "pxat", "keepttl"}


@dataclass(frozen=True)
class Review:
    level: str  # ERROR or WARNING
    path: str
    line: int
    message: str

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.level}: {self.message}"


def _without_comments(text: str) -> str:
    """Lua comments blanked (line numbers kept): `--[[ ... ]]` and `-- ...`."""
    text = re.sub(r"--\[(=*)\[.*?\]\1\]", lambda m: re.sub(r"[^\n]", " ", m[0]), text, flags=re.S)
    return re.sub(r"--[^\n]*", "", text)


def _arguments(text: str, start: int) -> list[str]:
    """The top-level arguments of the call whose '(' is just before `start`, as source text."""
    depth, quote, current, found = 0, "", [], []
    for char in text[start:start + 4096]:
        if quote:
            current.append(char)
            if char == quote:
                quote = ""
            continue
        if char in "'\"":
            quote = char
        elif char in "([{":
            depth += 1
        elif char in ")]}":
            if depth == 0:
                break
            depth -= 1
        elif char == "," and depth == 0:
            found.append("".join(current).strip())
            current = []
            continue
        current.append(char)
    found.append("".join(current).strip())
    return found


def review(library: Library, rules, table, t1_applies: bool) -> list[Review]:
    """Every approved script's `redis.call`s read against the policy's `rules` (see the module)."""
    found: list[Review] = []
    sources = [(script.path, script.body) for script in library.scripts.values()]
    sources += [(lib.path, lib.code) for lib in library.libraries]
    for path, body in sources:
        text = _without_comments(body.decode("utf-8", "replace"))
        calls = []
        for match in _CALL.finditer(text):
            line = text.count("\n", 0, match.start()) + 1
            arguments = _arguments(text, match.end())
            name = _STRING.fullmatch(arguments[0]) if arguments else None
            if name is None:
                found.append(Review(WARNING, path, line, f"the command name is not a string literal "
                                    f"({arguments[0] if arguments else ''}): the review cannot check it"))
                continue
            calls.append((line, name[2].lower(), arguments[1:]))
        gives_ttl = any(name in _EXPIRES for _, name, _ in calls)
        for line, name, rest in calls:
            spec = table.lookup([name.encode()]) if table is not None else None
            if spec is None:
                found.append(Review(WARNING, path, line, f"unknown command '{name}'"))
                continue
            denying = [rule.id for rule in rules
                       if rule.mode == "enforce" and hasattr(rule, "denies") and rule.denies(spec)]
            if denying:
                found.append(Review(ERROR, path, line, f"command {name.upper()} is refused by rule "
                                    f"{', '.join(denying)} of this policy"))
                continue
            if spec.key_specs and rest and not re.match(r"(?i)KEYS\s*\[", rest[0]):
                found.append(Review(WARNING, path, line, f"{name.upper()}: the key ({rest[0]}) is not taken "
                                    "from KEYS[...]: the proxy checks only the declared keys"))
            if t1_applies and not gives_ttl and _creates(spec) and not (
                    name == "set" and any(_word(arg) in _TTL_WORDS for arg in rest[2:])):
                found.append(Review(WARNING, path, line, f"{name.upper()} may create a key and the script "
                                    "gives it no TTL (rule T1): add EX/PX or an EXPIRE"))
    return found


def _word(arg: str) -> str:
    match = _STRING.fullmatch(arg)
    return match[2].lower() if match else ""


def _creates(spec) -> bool:
    return may_create(spec)
