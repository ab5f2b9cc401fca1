"""TLS on both sides: the settings, the SSL contexts built from them, and their reload.

Client side (`tls:`, Redis's tls-* settings in YAML form): `server_context` builds the listener's
context; a handshake that fails is counted by reason (`redis_guard_tls_handshake_failures`) and
logged at debug, so a plain-text client on a TLS port is refused without noise. Upstream side
(`rediss://` URLs and `upstream_tls:`): every place that opens an upstream connection asks
`upstream_context(address)` for the context to use (None: plain text). Certificates are reloaded
on SIGHUP and when their files change (`TLSWatcher`): a new context serves the new connections,
those already open keep theirs; a file that does not load keeps the old context and says why.
A client certificate's common name can name the application the client is logged in as
(`auth_clients_user: CN`, after Redis 8's tls-auth-clients-user): `peer_name`.
"""

from __future__ import annotations

import logging
import os
import ssl
from dataclasses import dataclass

from .metrics import CERT_EXPIRY, HANDSHAKE_FAILURES, TLS_RELOADS

log = logging.getLogger("redis_guard.tls")

AUTH_CLIENTS = ("no", "optional", "yes")
_PROTOCOLS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}


@dataclass(frozen=True, slots=True)
class ServerTLS:
    """`tls:` — what the listener presents and asks of clients."""

    cert_file: str
    key_file: str
    ca_cert_file: str | None = None  # to verify client certificates
    auth_clients: str = "yes"  # as Redis's tls-auth-clients: no | optional | yes
    protocols: tuple[str, ...] = ("TLSv1.2", "TLSv1.3")
    ciphers: str | None = None  # TLSv1.2 and below
    auth_clients_user: str | None = None  # "CN": a certificate's common name names the application

    def files(self) -> tuple[str, ...]:
        return tuple(f for f in (self.cert_file, self.key_file, self.ca_cert_file) if f)


@dataclass(frozen=True, slots=True)
class UpstreamTLS:
    """`upstream_tls:` — how the proxy connects to a `rediss://` upstream."""

    ca_cert_file: str | None = None  # None: the system's trusted CAs
    cert_file: str | None = None  # a client certificate, when the upstream asks for one
    key_file: str | None = None
    server_name: str | None = None  # the name the server certificate must bear (default: the host)
    verify: bool = True

    def files(self) -> tuple[str, ...]:
        return tuple(f for f in (self.cert_file, self.key_file, self.ca_cert_file) if f)


# -- settings ------------------------------------------------------------------------------------

def _text(section: dict, key: str, where: str) -> str | None:
    value = section.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{where}: '{key}' must be a non-empty string, got {value!r}")
    return value.strip()


def _path(section: dict, key: str, where: str, base: str | None) -> str | None:
    value = _text(section, key, where)
    if value is None:
        return None
    return os.path.join(base, value) if base is not None else os.path.abspath(value)


# The settings of `tls:` and `upstream_tls:` (config.py's check of a file's settings reads them too).
SERVER_SETTINGS = frozenset({"cert_file", "key_file", "ca_cert_file", "auth_clients", "protocols", "ciphers",
                             "ciphersuites", "auth_clients_user"})
UPSTREAM_SETTINGS = frozenset({"ca_cert_file", "cert_file", "key_file", "server_name", "verify"})


def parse_server_tls(section, where: str = "tls", base: str | None = None) -> ServerTLS:
    """The `tls:` mapping; file paths relative to `base` (the configuration file's directory)."""
    if not isinstance(section, dict):
        raise ValueError(f"{where}: must be a mapping")
    unknown = set(section) - SERVER_SETTINGS
    if unknown:
        raise ValueError(f"{where}: unknown setting(s): {', '.join(sorted(unknown))}")
    cert, key = _path(section, "cert_file", where, base), _path(section, "key_file", where, base)
    if cert is None or key is None:
        raise ValueError(f"{where}: 'cert_file' and 'key_file' are required")
    auth = section.get("auth_clients", "yes")
    auth = {True: "yes", False: "no"}.get(auth, auth) if isinstance(auth, bool) else str(auth).strip().lower()
    if auth not in AUTH_CLIENTS:
        raise ValueError(f"{where}: 'auth_clients' must be no, optional or yes, got {section['auth_clients']!r}")
    ca = _path(section, "ca_cert_file", where, base)
    if auth != "no" and ca is None:
        raise ValueError(f"{where}: auth_clients {auth} needs 'ca_cert_file' (the CA of the client certificates)")
    protocols = tuple((_text(section, "protocols", where) or "TLSv1.2 TLSv1.3").split())
    for name in protocols:
        if name not in _PROTOCOLS:
            raise ValueError(f"{where}: protocol {name!r} not supported (give TLSv1.2 and/or TLSv1.3)")
    if section.get("ciphersuites") is not None:
        # Refused rather than ignored: a restriction that silently does not apply is worse
        raise ValueError(f"{where}: 'ciphersuites' cannot be set (Python's ssl has no TLS 1.3 cipher suite "
                         "setting; OpenSSL's defaults apply): remove it, or use protocols: TLSv1.2 with ciphers")
    user = _text(section, "auth_clients_user", where)
    if user is not None and user.upper() not in ("CN", "OFF"):
        raise ValueError(f"{where}: 'auth_clients_user' must be CN or off, got {user!r}")
    user = None if user is None or user.upper() == "OFF" else "CN"
    if user and auth == "no":
        raise ValueError(f"{where}: auth_clients_user CN needs auth_clients optional or yes")
    return ServerTLS(cert, key, ca, auth, protocols, _text(section, "ciphers", where), user)


def parse_upstream_tls(section, where: str = "upstream_tls", base: str | None = None) -> UpstreamTLS:
    if not isinstance(section, dict):
        raise ValueError(f"{where}: must be a mapping")
    unknown = set(section) - UPSTREAM_SETTINGS
    if unknown:
        raise ValueError(f"{where}: unknown setting(s): {', '.join(sorted(unknown))}")
    verify = section.get("verify", True)
    if not isinstance(verify, bool):
        raise ValueError(f"{where}: 'verify' must be true or false, got {verify!r}")
    cert, key = _path(section, "cert_file", where, base), _path(section, "key_file", where, base)
    if (cert is None) != (key is None):
        raise ValueError(f"{where}: give both 'cert_file' and 'key_file', or neither")
    return UpstreamTLS(_path(section, "ca_cert_file", where, base), cert, key,
                       _text(section, "server_name", where), verify)


# -- contexts ------------------------------------------------------------------------------------

def _reason(exc: BaseException) -> str:
    """A short label for the metric: what went wrong, not which bytes."""
    text = (getattr(exc, "reason", None) or str(exc)).lower()
    if "wrong_version" in text or "wrong version" in text or "http_request" in text or "http request" in text \
            or "unknown_protocol" in text or "record_layer_failure" in text or "packet length" in text:
        return "plaintext"
    if "peer did not return a certificate" in text or "peer_did_not_return" in text:
        return "no_client_certificate"
    if "certificate" in text or "unknown ca" in text or "unknown_ca" in text:
        return "bad_certificate"
    if "protocol" in text or "version" in text:
        return "protocol_version"
    if "cipher" in text:
        return "no_shared_cipher"
    return "other"


class CountedSSLObject(ssl.SSLObject):
    """The listener's SSL objects: a failed handshake is counted and logged at debug (asyncio
    only logs it in debug mode); each connection takes the context current when it starts."""

    holder = None  # the ServerContexts whose current context new connections take

    def do_handshake(self) -> None:
        holder = self.holder
        if holder is not None and not getattr(self, "_started", False):
            self._started = True
            if self.context is not holder.context:
                self.context = holder.context  # a reloaded certificate: the new one from now on
        try:
            super().do_handshake()
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError):
            raise
        except (ssl.SSLError, OSError) as exc:
            reason = _reason(exc)
            HANDSHAKE_FAILURES.labels(reason).inc()
            log.debug("TLS handshake refused (%s): %s", reason, exc)
            raise


def _load_chain(context: ssl.SSLContext, cert: str, key: str, what: str) -> None:
    try:
        context.load_cert_chain(cert, key)
    except FileNotFoundError as exc:
        raise ValueError(f"{what}: {exc.filename}: no such file") from None
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"{what}: {cert} / {key} do not load: {exc}") from None


def _load_ca(context: ssl.SSLContext, ca: str, what: str) -> None:
    try:
        context.load_verify_locations(cafile=ca)
    except FileNotFoundError:
        raise ValueError(f"{what}: {ca}: no such file") from None
    except (ssl.SSLError, OSError) as exc:
        raise ValueError(f"{what}: {ca} does not load: {exc}") from None


def server_context(settings: ServerTLS) -> ssl.SSLContext:
    """The listener's context; ValueError naming the file that does not load."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    versions = sorted(_PROTOCOLS[name] for name in settings.protocols)
    context.minimum_version, context.maximum_version = versions[0], versions[-1]
    _load_chain(context, settings.cert_file, settings.key_file, "tls")
    if settings.ca_cert_file:
        _load_ca(context, settings.ca_cert_file, "tls")
    context.verify_mode = {"no": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "yes": ssl.CERT_REQUIRED}[
        settings.auth_clients]
    if settings.ciphers:
        try:
            context.set_ciphers(settings.ciphers)
        except ssl.SSLError:
            raise ValueError(f"tls: ciphers {settings.ciphers!r}: none of them is available") from None
    context.options |= ssl.OP_NO_COMPRESSION
    return context


def client_context(settings: UpstreamTLS) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    if settings.verify:
        if settings.ca_cert_file:
            _load_ca(context, settings.ca_cert_file, "upstream_tls")
        else:
            context.load_default_certs()
    else:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if settings.cert_file:
        _load_chain(context, settings.cert_file, settings.key_file, "upstream_tls")
    return context


def expiry(cert_file: str) -> float | None:
    """The certificate's notAfter as Unix time (None when it cannot be read)."""
    try:
        decoded = ssl._ssl._test_decode_cert(cert_file)  # the stdlib's own PEM decoder
        return float(ssl.cert_time_to_seconds(decoded["notAfter"]))
    except (OSError, ValueError, KeyError, ssl.SSLError):
        return None


class ServerContexts:
    """The listener's current context; `reload` builds a new one from the files."""

    def __init__(self, settings: ServerTLS):
        self.settings = settings
        self.context = server_context(settings)  # ValueError at start: the proxy does not start
        self.context.sslobject_class = self._object_class()
        self._gauge()

    def _object_class(self):
        return type("ServerSSLObject", (CountedSSLObject,), {"holder": self})

    def _gauge(self) -> None:
        when = expiry(self.settings.cert_file)
        if when is not None:
            CERT_EXPIRY.labels("server").set(when)

    def reload(self) -> None:
        context = server_context(self.settings)
        context.sslobject_class = self.context.sslobject_class
        self.context = context
        self._gauge()


# -- upstream side -------------------------------------------------------------------------------

_upstream = {"settings": None, "context": None, "plain": frozenset(), "only": None}


def configure_upstream(settings: UpstreamTLS | None, enabled: bool, plain=(), only=None) -> None:
    """Upstream connections use TLS when `enabled` (a rediss:// upstream) with these settings,
    except to the addresses in `plain` (sentinels without TLS), or only to those in `only`
    (sentinels with TLS before a plain master)."""
    _upstream["settings"] = settings or UpstreamTLS()
    _upstream["context"] = client_context(_upstream["settings"]) if enabled else None
    _upstream["plain"] = frozenset(plain)
    _upstream["only"] = frozenset(only) if only is not None else None
    if enabled and _upstream["settings"].cert_file:
        when = expiry(_upstream["settings"].cert_file)
        if when is not None:
            CERT_EXPIRY.labels("upstream").set(when)


def reload_upstream() -> None:
    if _upstream["context"] is not None:
        _upstream["context"] = client_context(_upstream["settings"])
        if _upstream["settings"].cert_file:
            when = expiry(_upstream["settings"].cert_file)
            if when is not None:
                CERT_EXPIRY.labels("upstream").set(when)


def upstream_enabled() -> bool:
    """Some upstream connection of this process uses TLS."""
    return _upstream["context"] is not None


def upstream_context(address) -> ssl.SSLContext | None:
    """The context for a connection to `address`, or None: plain text."""
    context = _upstream["context"]
    if context is None or address in _upstream["plain"]:
        return None
    if _upstream["only"] is not None and address not in _upstream["only"]:
        return None
    return context


def upstream_ssl(address) -> dict:
    """Keyword arguments of `create_connection` / `open_connection` for `address`."""
    context = upstream_context(address)
    if context is None:
        return {}
    name = _upstream["settings"].server_name or (address.host if context.check_hostname else None)
    return {"ssl": context, "server_hostname": name}


def wrap_socket(sock, address):
    """The blocking probes' (`monitor/ready.py`) socket, TLS when the upstream is."""
    arguments = upstream_ssl(address)
    if not arguments:
        return sock
    return arguments["ssl"].wrap_socket(sock, server_hostname=arguments["server_hostname"])


def peer_name(transport) -> str | None:
    """The common name of the client certificate a TLS client presented, or None."""
    sslobj = transport.get_extra_info("ssl_object") if transport is not None else None
    if sslobj is None:
        return None
    cert = sslobj.getpeercert()
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return None


# -- reload --------------------------------------------------------------------------------------

def _stamp(files) -> tuple:
    stamps = []
    for path in files:
        try:
            info = os.stat(path)
            stamps.append((info.st_mtime_ns, info.st_size, info.st_ino))
        except OSError:
            stamps.append(None)
    return tuple(stamps)


class TLSWatcher:
    """SIGHUP and changed files (checked every `interval`): new contexts from the files. A file
    that does not load leaves the old context in use and logs why."""

    def __init__(self, server: ServerContexts | None):
        self.server = server
        files = list(server.settings.files()) if server is not None else []
        if _upstream["context"] is not None:
            files += list(_upstream["settings"].files())
        self.files = tuple(dict.fromkeys(files))
        self.stamp = _stamp(self.files)
        self._handle = None

    def reload(self, reason: str) -> bool:
        self.stamp = _stamp(self.files)
        try:
            if self.server is not None:
                self.server.reload()
            reload_upstream()
        except ValueError as exc:
            TLS_RELOADS.labels("failed").inc()
            log.error("TLS certificates not reloaded (%s), the old ones stay in use: %s", reason, exc)
            return False
        TLS_RELOADS.labels("ok").inc()
        log.info("TLS certificates reloaded (%s)", reason)
        return True

    def start(self, loop, interval: float = 1.0) -> None:
        if self.files:
            self._handle = loop.call_later(interval, self._watch, loop, interval)

    def stop(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _watch(self, loop, interval: float) -> None:
        if _stamp(self.files) != self.stamp:
            self.reload("file changed")
        self._handle = loop.call_later(interval, self._watch, loop, interval)
