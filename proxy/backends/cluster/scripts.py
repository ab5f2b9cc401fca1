"""The scripts and function libraries clients loaded through the proxy in front of a cluster,
kept so that a node that lacks them gets them (sans I/O).

`SCRIPT LOAD` and `FUNCTION LOAD` go to every master (`handlers.fanout`); a node that was not
there then (a master added by resharding, a node restarted with an empty script cache, a replica
promoted that never got a script: Redis does not replicate the script cache) answers `EVALSHA`
with NOSCRIPT and `FCALL` with "Function not found". `Known` keeps what was loaded, as the
merged reply said it was (`noted`), and forgets it on SCRIPT FLUSH, FUNCTION DELETE, FUNCTION
FLUSH and FUNCTION RESTORE ... FLUSH; when a node answers so, the router loads it there and sends
the command again on the same connection (`ClusterRouter.reload`), as redis-py's cluster client
does, so the client never sees the error. Bounded: at most `MAX_BYTES` of bodies and code and
`MAX_ENTRIES` entries; past that, a new script or library is not kept (its NOSCRIPT shows, as
in front of a cluster without the proxy). Per worker process: a worker that did not see the load
(another worker's client loaded it) does not know the body either.

EVAL caches its body on the one master that ran it, where one Redis would then run `EVALSHA` of
it anywhere: the bodies the proxy saw in EVAL/EVAL_RO are kept too (`saw_eval`), within their own
byte budget (`upstream_options: eval_scripts_memory`), the least recently run dropped first, and
are loaded where NOSCRIPT is answered like the loaded ones. Per EVAL this costs one dictionary
look-up keyed by the body (no SHA1): a body is hashed only when a NOSCRIPT asks for a SHA the
proxy does not know yet, and then once while it is kept (`_body`). A transaction cannot load a
script on its own connection between MULTI and EXEC (the load would be queued and answered in
EXEC's reply): `preloads` gives what its queued EVALSHA/FCALL need, loaded on another connection
of the transaction's master before EXEC goes (`handlers._end`).
"""

from __future__ import annotations

import hashlib
import logging
from collections import OrderedDict

import hiredis

log = logging.getLogger("redis_guard.cluster")

MAX_BYTES = 4 << 20  # bodies and library code kept, in bytes
MAX_ENTRIES = 10_000  # scripts and libraries kept
EVAL_BYTES = 4 << 20  # bodies seen in EVAL kept, in bytes (the default of `eval_scripts_memory`)
EVAL_OVERHEAD = 256  # bytes counted per body kept besides its own: objects, dictionary entries, its SHA

NOSCRIPT = b"-NOSCRIPT"
NO_FUNCTION = b"-ERR Function not found"


def _bulk(reply: bytes) -> bytes | None:
    """The text of a bulk string reply, None for anything else."""
    if reply[:1] != b"$":
        return None
    head, _, rest = reply.partition(b"\r\n")
    try:
        size = int(head[1:])
    except ValueError:
        return None
    return rest[:size] if size >= 0 else None


class Known:
    """sha (lower-case hex bytes) -> script body; library name -> its code."""

    __slots__ = ("scripts", "libraries", "size", "full_logged", "evals", "eval_shas", "eval_size", "eval_budget",
                 "unhashed")

    def __init__(self, eval_budget: int = EVAL_BYTES):
        self.scripts: dict[bytes, bytes] = {}
        self.libraries: dict[bytes, bytes] = {}
        self.size = 0
        self.full_logged = False
        # Bodies seen in EVAL, least recently run first -> their SHA (None: not hashed yet)
        self.evals: OrderedDict[bytes, bytes | None] = OrderedDict()
        self.eval_shas: dict[bytes, bytes] = {}  # SHA -> body, of the evals hashed
        self.eval_size = 0
        self.eval_budget = eval_budget
        self.unhashed = 0  # evals whose SHA is None

    def any(self) -> bool:
        """Is there anything a node could lack (a NOSCRIPT worth looking into)?"""
        return bool(self.scripts or self.libraries or self.evals)

    def saw_eval(self, body) -> None:
        """EVAL/EVAL_RO of `body` is on its way to a master, which will cache it: kept (as the
        most recently run) so that any master can run EVALSHA of it."""
        evals = self.evals
        if body in evals:
            evals.move_to_end(body)
            return
        size = len(body) + EVAL_OVERHEAD
        if size > self.eval_budget:
            return
        evals[bytes(body)] = None
        self.unhashed += 1
        self.eval_size += size
        while self.eval_size > self.eval_budget:
            old, sha = evals.popitem(last=False)
            self.eval_size -= len(old) + EVAL_OVERHEAD
            if sha is None:
                self.unhashed -= 1
            else:
                del self.eval_shas[sha]

    def _body(self, sha: bytes) -> bytes | None:
        """The body of the script `sha` (lower-case hex), loaded or seen in EVAL, else None. The
        bodies seen in EVAL since the last time are hashed now, each once."""
        body = self.scripts.get(sha)
        if body is not None:
            return body
        if self.unhashed:
            shas = self.eval_shas
            evals = self.evals
            for seen, known in evals.items():
                if known is None:
                    digest = hashlib.sha1(seen).hexdigest().encode()
                    evals[seen] = digest  # (a value replaced: the order stays)
                    if digest in shas:  # (never: two bodies, one SHA1)
                        continue
                    shas[digest] = seen
            self.unhashed = 0
        return self.eval_shas.get(sha)

    def _forget_evals(self) -> None:
        self.evals.clear()
        self.eval_shas.clear()
        self.eval_size = self.unhashed = 0

    def _fits(self, size: int) -> bool:
        if self.size + size <= MAX_BYTES and len(self.scripts) + len(self.libraries) < MAX_ENTRIES:
            return True
        if not self.full_logged:
            self.full_logged = True
            log.warning("cluster: more scripts and function libraries loaded than the proxy keeps (%d bytes, %d "
                        "entries): a node added or restarted later may answer NOSCRIPT for the others",
                        MAX_BYTES, MAX_ENTRIES)
        return False

    def noted(self, args, reply: bytes) -> None:
        """A SCRIPT or FUNCTION command went to every master and `reply` is the client's (merged)."""
        if reply[:1] in (b"-", b"!") or len(args) < 2:
            return
        sub = args[1].lower()
        if args[0].lower() == b"script":
            if sub == b"load" and len(args) == 3:
                body = bytes(args[2])
                sha = hashlib.sha1(body).hexdigest().encode()
                if sha not in self.scripts and self._fits(len(body)):
                    self.scripts[sha] = body
                    self.size += len(body)
            elif sub == b"flush":
                self.size -= sum(map(len, self.scripts.values()))
                self.scripts.clear()
                self._forget_evals()
            return
        if sub == b"load":
            name = _bulk(reply)
            if name is None or len(args) < 3:
                return
            code = bytes(args[-1])
            self._forget_library(name)
            if self._fits(len(code)):
                self.libraries[name] = code
                self.size += len(code)
        elif sub == b"delete" and len(args) == 3:
            self._forget_library(bytes(args[2]))
        elif sub == b"flush" or (sub == b"restore" and len(args) > 3 and args[3].lower() == b"flush"):
            self.size -= sum(map(len, self.libraries.values()))
            self.libraries.clear()

    def _forget_library(self, name: bytes) -> None:
        code = self.libraries.pop(name, None)
        if code is not None:
            self.size -= len(code)

    def watching(self, args, merge):
        """`merge`, noting its reply (a fan-out of SCRIPT/FUNCTION)."""
        def merged(replies) -> bytes:
            reply = merge(replies)
            self.noted(args, reply)
            if len(args) > 2 and args[0].lower() == b"script" and args[1].lower() == b"exists":
                return self.exists(args[2:], reply)
            return reply
        return merged

    def exists(self, shas, reply: bytes) -> bytes:
        """SCRIPT EXISTS merged (1 where every master has the script): 1 too where the proxy
        knows the body, since EVALSHA of it runs on any master (loaded where it lacks), as one
        Redis that cached it answers."""
        if reply[:1] != b"*" or not self.any():
            return reply
        lines = reply.split(b"\r\n")
        if len(lines) != len(shas) + 2:
            return reply
        for at, sha in enumerate(shas, 1):
            if lines[at] == b":0" and self._body(bytes(sha).lower()) is not None:
                lines[at] = b":1"
        return b"\r\n".join(lines)

    def loads_for(self, request: bytes, error: bytes) -> bytes | None:
        """A node answered `request` (one command's bytes) with `error`: the hidden commands that
        load there what it lacks, None when that is not a missing script or function the proxy
        knows."""
        if error.startswith(NOSCRIPT):
            if not self.scripts and not self.evals:
                return None
            args = _command(request)
            if args is None or len(args) < 2 or args[0].lower() not in (b"evalsha", b"evalsha_ro"):
                return None
            body = self._body(args[1].lower())
            return None if body is None else hiredis.pack_command((b"SCRIPT", b"LOAD", body))
        if error.startswith(NO_FUNCTION) and self.libraries:
            args = _command(request)
            if args is None or args[0].lower() not in (b"fcall", b"fcall_ro"):
                return None
            return b"".join(hiredis.pack_command((b"FUNCTION", b"LOAD", b"REPLACE", code))
                            for code in self.libraries.values())
        return None

    def load_count(self, error: bytes) -> int:
        """How many replies the commands of `loads_for` make."""
        return 1 if error.startswith(NOSCRIPT) else len(self.libraries)

    def preloads(self, queued) -> tuple[bytes, int] | None:
        """What a transaction's master must have before EXEC runs the queued `(name, first
        argument)` of EVALSHA/EVALSHA_RO/FCALL/FCALL_RO: the commands that load the scripts the
        proxy knows (SCRIPT LOAD: nothing changes where the script is cached already) and, for an
        FCALL, the libraries (FUNCTION LOAD without REPLACE: refused, changing nothing, where the
        library is), and how many replies they make; None when there is nothing to load."""
        loads = {}
        libraries = False
        for name, first in queued:
            if name in (b"fcall", b"fcall_ro"):
                libraries = True
                continue
            sha = bytes(first).lower()
            if sha not in loads:
                body = self._body(sha)
                if body is not None:
                    loads[sha] = hiredis.pack_command((b"SCRIPT", b"LOAD", body))
        commands = list(loads.values())
        if libraries:
            commands += [hiredis.pack_command((b"FUNCTION", b"LOAD", code)) for code in self.libraries.values()]
        return (b"".join(commands), len(commands)) if commands else None


def _command(request: bytes):
    reader = hiredis.Reader()
    reader.feed(request)
    try:
        args = reader.gets()
    except hiredis.ProtocolError:
        return None
    return args if isinstance(args, list) and args else None
