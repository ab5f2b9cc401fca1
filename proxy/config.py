"""Configuration: load and validate everything once at start-up into frozen dataclasses.

The YAML file gives defaults; command-line flags override single fields. Nothing else in the
proxy reads YAML or environment variables, so what the proxy runs with is exactly what
`load_config` returned. Every setting the file names must be one the loader reads: the known
settings are those `_build` asks for when it builds the defaults (so a new setting is known as
soon as it is read), and every unknown one, at any depth, is refused at once with its line and
the closest known name (`unknown_settings`, with the policy loader's `yamlcheck`).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from functools import lru_cache
from urllib.parse import unquote, urlsplit

import yaml

from . import tls
from .yamlcheck import compose, did_you_mean, line, yaml_problem


class ConfigError(Exception):
    pass


NO_POLICY = "none"  # `policy: none` / `--policy none`: no rules at all (configs/passthrough.yaml)


@dataclass(frozen=True, slots=True)
class Address:
    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class Upstream:
    address: Address
    username: str | None = None
    password: str | None = None
    db: int = 0
    tls: bool = False  # rediss://: with the settings of `upstream_tls`

    def url(self, redact: bool = True) -> str:
        auth = ""
        if self.password is not None:
            secret = "***" if redact else self.password
            auth = f"{self.username or ''}:{secret}@"
        elif self.username:
            auth = f"{self.username}@"
        return f"{'rediss' if self.tls else 'redis'}://{auth}{self.address}/{self.db}"


def default_max_memory() -> int:
    """limits.max_memory's default: half the machine's memory (or of the container's cgroup
    limit, when lower), 0 (off) where neither can be read."""
    try:
        total = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        total = 0
    try:
        with open("/sys/fs/cgroup/memory.max", encoding="ascii") as handle:
            text = handle.read().strip()
        if text.isdigit() and (total == 0 or int(text) < total):
            total = int(text)
    except OSError:
        pass
    return total // 2


@dataclass(frozen=True, slots=True)
class Limits:
    max_request_bytes: int = 512 * 1024 * 1024
    max_args: int = 1024 * 1024
    client_write_buffer: int = 1024 * 1024  # unread reply bytes before the proxy stops reading the client
    client_output_buffer: int = 256 * 1024 * 1024  # hard safety bound on unread replies (pushes...): disconnect
    max_memory: int = field(default_factory=lambda: default_max_memory())  # all the proxy buffers; 0: off
    max_clients: int = 10000  # client connections per process, like Redis's maxclients
    client_idle_timeout: float = 0.0  # seconds without a request before a client is closed; 0: off


@dataclass(frozen=True, slots=True)
class Sentinel:
    """A master managed by Redis Sentinel: its name and the sentinels to ask for it."""

    master: str
    sentinels: tuple[Address, ...]
    username: str | None = None  # the master's (and its replicas') credentials
    password: str | None = None
    sentinel_username: str | None = None  # the sentinels' own, when they require one
    sentinel_password: str | None = None
    db: int = 0
    tls: bool = False  # the master and its replicas speak TLS (upstream_tls)
    sentinel_tls: bool = False  # the sentinels do


@dataclass(frozen=True, slots=True)
class ClusterFace:
    """`cluster_face:`: the address `face: cluster` presents (CLUSTER SLOTS/SHARDS/NODES, the
    node id) when clients reach the proxy by another one than its own (NAT, a port forward).
    None: the local address of each client's connection; a port 0: the proxy's own port."""

    announce: Address | None = None  # host[:port], as Redis's cluster-announce-ip/-port
    announce_tls_port: int | None = None  # for clients of the TLS listener (cluster-announce-tls-port)


@dataclass(frozen=True, slots=True)
class Config:
    listen: Address = Address("127.0.0.1", 6380)
    upstream: Upstream | None = None
    limits: Limits = field(default_factory=Limits)
    shared_connections: int = 1
    connect_timeout: float = 2.0
    shutdown_timeout: float = 10.0
    workers: int = 1
    policy: str | None = None  # path of the policy file; None: the built-in baseline; NO_POLICY: no rules
    shadow_policy: str | None = None  # a candidate policy decided next to it, changing nothing
    metrics: Address | None = None  # HTTP address of the Prometheus metrics
    upstream_cluster: tuple[Upstream, ...] = ()  # seed nodes of a Redis Cluster upstream
    failover_timeout: float = 10.0  # how long a request waits for a cluster slot's new owner
    read_from_replicas: bool = False  # cluster, sentinel: read-only commands go to a replica
    warm_spares: int = 1  # idle connections kept ready per (database, protocol) for clients that move to their own
    upstream_sentinel: Sentinel | None = None  # a Sentinel-managed master instead of `upstream`
    upstream_acl: bool = True  # create the policy's ACL users on the upstream (policy/acl.py)
    liveness_timeout: float = 5.0  # /healthz: 503 when an event loop has not run a callback within it
    findings_log_interval: float = 10.0  # seconds: the policy's findings gathered per rule, app and command
    request_timeout: float = 10.0  # seconds without a reply before waiting clients get an error; 0: none
    tls: object | None = None  # tls.ServerTLS: the listener (or `tls_listen`) speaks TLS
    tls_listen: Address | None = None  # a second listener, with TLS, beside the plain-text `listen`
    upstream_tls: object | None = None  # tls.UpstreamTLS: how rediss:// upstreams are connected to
    face: str = "standalone"  # in front of a cluster: a standalone server, or a one-node cluster (FACES)
    cluster_face: ClusterFace = field(default_factory=ClusterFace)  # face: cluster's announced address
    learn: str | None = None  # serve --learn: record the commands and key shapes clients use (proxy/infer/traffic.py)
    eval_scripts_memory: int = 4 << 20  # cluster: bytes of EVAL bodies kept for EVALSHA on other masters; 0: none

    def replace(self, **changes) -> Config:
        return dataclasses.replace(self, **changes)


def parse_address(text: str, default_port: int = 6379) -> Address:
    """HOST:PORT, [IPv6]:PORT, HOST (the default port), or PORT alone (on 127.0.0.1)."""
    text = text.strip()
    if text.isdigit():
        text = f"127.0.0.1:{text}"
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    else:
        host, sep, port = text.rpartition(":")
        if not sep:
            host, port = text, ""
    if not host:
        raise ConfigError(f"address {text!r} has no host")
    try:
        number = int(port) if port else default_port
    except ValueError:
        raise ConfigError(f"address {text!r}: port {port!r} is not a number") from None
    if not 0 <= number <= 65535:
        raise ConfigError(f"address {text!r}: port out of range")
    return Address(host, number)


def parse_upstream(url: str) -> Upstream:
    """redis[s]://[user:pass@]host:port[/db]; a bare host:port is accepted too."""
    if "://" not in url:
        url = "redis://" + url
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        raise ConfigError(f"upstream {url!r}: only redis:// and rediss:// (TLS) are supported")
    netloc = parts.netloc.rpartition("@")[2]
    address = parse_address(netloc)
    path = parts.path.strip("/")
    try:
        db = int(path) if path else 0
    except ValueError:
        raise ConfigError(f"upstream {url!r}: database {path!r} is not a number") from None
    username = unquote(parts.username) if parts.username else None
    password = unquote(parts.password) if parts.password is not None else None
    return Upstream(address, username, password, db, parts.scheme == "rediss")


def parse_cluster_seeds(value) -> tuple[Upstream, ...]:
    """'host:port,host:port' (or a YAML list); each may be a redis:// URL with credentials."""
    items = value if isinstance(value, (list, tuple)) else str(value).split(",")
    seeds = tuple(parse_upstream(str(item).strip()) for item in items if str(item).strip())
    if not seeds:
        raise ConfigError("upstream_cluster: give at least one HOST:PORT")
    for seed in seeds:
        if seed.db:
            raise ConfigError(f"upstream_cluster {seed.address}: a cluster has only database 0")
    return seeds


def parse_sentinel(value, where: str = "upstream_sentinel") -> Sentinel:
    """'MASTER@HOST:PORT[,HOST:PORT...]', or a mapping {master, sentinels, username, password,
    sentinel_username, sentinel_password, db}."""
    if isinstance(value, str):
        master, sep, hosts = value.partition("@")
        if not sep or not master.strip():
            raise ConfigError(f"{where}: give MASTER@HOST:PORT[,HOST:PORT...], got {value!r}")
        value = {"master": master.strip(), "sentinels": hosts}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: must be MASTER@HOST:PORT,... or a mapping")
    unknown = set(value) - {"master", "sentinels", "username", "password", "sentinel_username",
                            "sentinel_password", "db", "tls", "sentinel_tls"}
    if unknown:
        raise ConfigError(f"{where}: unknown setting(s): {', '.join(sorted(unknown))}")
    master = value.get("master")
    if not isinstance(master, str) or not master:
        raise ConfigError(f"{where}: 'master' (the name the sentinels monitor) is required")
    hosts = value.get("sentinels")
    items = hosts if isinstance(hosts, (list, tuple)) else str(hosts or "").split(",")
    sentinels = tuple(parse_address(str(item).strip(), 26379) for item in items if str(item).strip())
    if not sentinels:
        raise ConfigError(f"{where}: give at least one sentinel HOST:PORT")
    db = value.get("db", 0)
    if isinstance(db, bool) or not isinstance(db, int) or db < 0:
        raise ConfigError(f"{where}: 'db' must be a database number, got {db!r}")

    def text(key):
        item = value.get(key)
        return None if item is None else str(item)

    return Sentinel(master, sentinels, text("username"), text("password"), text("sentinel_username"),
                    text("sentinel_password"), db, _flag(value, "tls", where), _flag(value, "sentinel_tls", where))


def _flag(section: dict, key: str, where: str) -> bool:
    value = section.get(key, False)
    if not isinstance(value, bool):
        raise ConfigError(f"{where}: '{key}' must be true or false, got {value!r}")
    return value


def _section(data: dict, name: str, where: str) -> dict:
    value = data.get(name) or {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: '{name}' must be a mapping")
    return _Asked(value, data.asked, (*data.path, name)) if isinstance(data, _Asked) else value


class _Asked(dict):
    """A mapping of the file that notes each setting the loader asks it for (`known_settings`)."""

    def __init__(self, items, asked: dict, path: tuple = ()):
        super().__init__(items)
        self.asked = asked
        self.path = path
        asked.setdefault(path, set())

    def get(self, key, default=None):
        self.asked[self.path].add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.asked[self.path].add(key)
        return super().__getitem__(key)

    def __contains__(self, key):
        self.asked[self.path].add(key)
        return super().__contains__(key)


@lru_cache(maxsize=1)
def known_settings() -> dict[tuple[str, ...], frozenset[str]]:
    """Section path (() for the top level, ('limits',)...) -> the settings it may hold: what
    `_build` asks for while building the defaults, the fields of `Limits`, and the mapping form
    of `upstream_sentinel` (the fields of `Sentinel`)."""
    asked: dict = {}
    _build(_Asked({}, asked), "defaults")
    known = {path: frozenset(keys) for path, keys in asked.items()}
    known[("limits",)] = known.get(("limits",), frozenset()) | {f.name for f in dataclasses.fields(Limits)}
    known[("upstream_sentinel",)] = frozenset(f.name for f in dataclasses.fields(Sentinel))

    known[("tls",)], known[("upstream_tls",)] = tls.SERVER_SETTINGS, tls.UPSTREAM_SETTINGS
    return known


def unknown_settings(root, source: str) -> list[str]:
    """'file:line: ...' for every setting of the file's node tree that is no setting, at any depth,
    each with the closest known name."""
    known = known_settings()
    out: list[str] = []

    def walk(node, path):
        for key_node, value_node in node.value:
            key = str(key_node.value)
            where = (*path, key)
            names = known.get(path, frozenset())
            if key == "<<":  # a YAML merge key: the mappings it brings in, checked as if written here
                merged = value_node.value if isinstance(value_node, yaml.SequenceNode) else [value_node]
                for each in merged:
                    if isinstance(each, yaml.MappingNode):
                        walk(each, path)
                continue
            if key not in names:
                inside = f"{'.'.join(path)}: " if path else ""
                hint = did_you_mean(key, names) or f" (expected one of: {', '.join(sorted(names))})"
                out.append(f"{source}:{line(key_node)}: {inside}unknown setting '{key}'{hint}")
            elif where in known and isinstance(value_node, yaml.MappingNode):
                walk(value_node, where)

    walk(root, ())
    return out


def _number(section: dict, key: str, default, kind, where: str):
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
        raise ConfigError(f"{where}: '{key}' must be a positive number, got {value!r}")
    return kind(value)


def _seconds_or_none(section: dict, key: str, default: float, where: str) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or value != value:
        raise ConfigError(f"{where}: '{key}' must be a number of seconds, 0 or more (0: none), got {value!r}")
    return float(value)


def _count(section: dict, key: str, default: int, where: str) -> int:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{where}: '{key}' must be a whole number, 0 or more, got {value!r}")
    return value


def _off_or_number(section: dict, key: str, default: float, where: str) -> float:
    value = section.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0:
        raise ConfigError(f"{where}: '{key}' must be a number, 0 (off) or more, got {value!r}")
    return float(value)


FACES = ("standalone", "cluster")


def parse_face(value) -> str:
    """`face:` / `--face`: how the proxy presents itself in front of a cluster."""
    text = str(value).strip().lower() if isinstance(value, str) else value
    if text not in FACES:
        raise ConfigError(f"'face' must be standalone or cluster, got {value!r}")
    return text


def check_face(config) -> None:
    """`face: cluster` presents a Redis Cluster as one node: in front of one server (upstream,
    upstream_sentinel) there is no cluster to present, and that server's databases 1-15 would
    be out of a cluster client's reach."""
    if config.face == "cluster" and not config.upstream_cluster:
        raise ConfigError("face: cluster presents a Redis Cluster (upstream_cluster) as one node; in front of "
                          "one server (upstream, upstream_sentinel) use face: standalone and a standalone client")
    if config.face != "cluster" and config.cluster_face != ClusterFace():
        raise ConfigError("cluster_face: the address announced by face: cluster; with face: standalone "
                          "nothing announces it (set face: cluster, or remove cluster_face)")


def parse_cluster_face(section, where: str) -> ClusterFace:
    """`cluster_face: {announce: host[:port], announce_tls_port: port}`."""
    announce = section.get("announce")
    tls_port = section.get("announce_tls_port")
    if announce is not None and (not isinstance(announce, (str, int)) or isinstance(announce, bool)
                                 or not str(announce).strip()):
        raise ConfigError(f"{where}: cluster_face: 'announce' must be host or host:port, got {announce!r}")
    address = parse_address(str(announce), 0) if announce is not None else None
    if address is not None and str(announce).strip().isdigit():
        raise ConfigError(f"{where}: cluster_face: 'announce' needs a host (host or host:port), got {announce!r}")
    if tls_port is not None:
        if isinstance(tls_port, bool) or not isinstance(tls_port, int) or not 0 < tls_port <= 65535:
            raise ConfigError(f"{where}: cluster_face: 'announce_tls_port' must be a port (1-65535), got {tls_port!r}")
        if address is None:
            raise ConfigError(f"{where}: cluster_face: 'announce_tls_port' goes with 'announce' (its host)")
    return ClusterFace(address, tls_port)


def parse_policy(value, base: str | None = None) -> str | None:
    """`policy:` / `--policy`: a file (relative to `base`), or `none` for no rules at all."""
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"'policy' must be a policy file or none, got {value!r}")
    if value.strip().lower() == NO_POLICY:
        return NO_POLICY
    return os.path.join(base, value) if base is not None else os.path.abspath(value)


def parse_switch(value, name: str) -> bool:
    """on/off (YAML reads a bare on/off as true/false), true/false."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in ("on", "true", "yes"):
        return True
    if text in ("off", "false", "no"):
        return False
    raise ConfigError(f"'{name}' must be on or off, got {value!r}")


def load_config(path: str | None) -> Config:
    if path is None:
        return Config()
    try:
        with open(path, encoding="utf-8") as handle:
            text = handle.read()
    except OSError as exc:
        raise ConfigError(f"{path}: {exc.strerror}") from None
    try:
        root = compose(text)
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        message, at = yaml_problem(exc, text)
        raise ConfigError(f"{path}:{at}: {message}" if at else f"{path}: {message}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping")
    unknown = unknown_settings(root, path) if isinstance(root, yaml.MappingNode) else []
    if unknown:
        raise ConfigError("\n".join(unknown))
    return _build(data, path)


def _build(data: dict, path: str) -> Config:
    """The configuration of the file's values (`data`), checked one by one."""
    defaults = Config()
    limits_in = _section(data, "limits", path)
    options = _section(data, "upstream_options", path)
    base = Limits()
    limits = Limits(
        max_request_bytes=_number(limits_in, "max_request_bytes", base.max_request_bytes, int, path),
        max_args=_number(limits_in, "max_args", base.max_args, int, path),
        client_write_buffer=_number(limits_in, "client_write_buffer", base.client_write_buffer, int, path),
        client_output_buffer=_number(limits_in, "client_output_buffer", base.client_output_buffer, int, path),
        max_memory=_count(limits_in, "max_memory", base.max_memory, path),
        max_clients=_number(limits_in, "max_clients", base.max_clients, int, path),
        client_idle_timeout=_off_or_number(limits_in, "client_idle_timeout", base.client_idle_timeout, path),
    )
    upstream = data.get("upstream")
    if sum(1 for key in ("upstream", "upstream_cluster", "upstream_sentinel") if data.get(key)) > 1:
        raise ConfigError(f"{path}: give one of 'upstream', 'upstream_cluster', 'upstream_sentinel'")

    def beside(file):  # a file named in the configuration is relative to it
        return None if file is None else os.path.join(os.path.dirname(os.path.abspath(path)), str(file))

    policy = data.get("policy")
    if policy is not None:
        policy = parse_policy(policy, os.path.dirname(os.path.abspath(path)))

    return Config(
        policy=policy,
        shadow_policy=beside(data.get("shadow_policy")),
        learn=beside(data.get("learn")),
        metrics=parse_address(str(data["metrics"]), 9121) if data.get("metrics") else None,
        listen=parse_address(str(data["listen"]), 6380) if data.get("listen") else defaults.listen,
        upstream=parse_upstream(str(upstream)) if upstream else None,
        upstream_cluster=parse_cluster_seeds(data["upstream_cluster"]) if data.get("upstream_cluster") else (),
        upstream_sentinel=parse_sentinel(data["upstream_sentinel"], path) if data.get("upstream_sentinel") else None,
        warm_spares=_count(options, "warm_spares", 1, path),
        failover_timeout=_number(options, "failover_timeout", 10.0, float, path),
        read_from_replicas=_flag(options, "read_from_replicas", path),
        eval_scripts_memory=_count(options, "eval_scripts_memory", 4 << 20, path),
        limits=limits,
        shared_connections=_number(options, "shared_connections", 1, int, path),
        connect_timeout=_number(options, "connect_timeout", 2.0, float, path),
        request_timeout=_seconds_or_none(options, "request_timeout", 10.0, path),
        shutdown_timeout=_number(data, "shutdown_timeout", 10.0, float, path),
        findings_log_interval=_number(data, "findings_log_interval", 10.0, float, path),
        workers=_number(data, "workers", 1, int, path),
        upstream_acl=parse_switch(data.get("upstream_acl", True), "upstream_acl"),
        liveness_timeout=_number(data, "liveness_timeout", 5.0, float, path),
        face=parse_face(data.get("face", "standalone")),
        cluster_face=parse_cluster_face(_section(data, "cluster_face", path), path),
        **_tls_settings(data, path),
    )


def _tls_settings(data: dict, path: str) -> dict:
    """`tls`, `tls_listen`, `upstream_tls` (proxy/tls.py); their files relative to the config file."""
    base = os.path.dirname(os.path.abspath(path))
    try:
        return {
            "tls": tls.parse_server_tls(data["tls"], f"{path}: tls", base) if data.get("tls") else None,
            "tls_listen": parse_address(str(data["tls_listen"]), 6380) if data.get("tls_listen") else None,
            "upstream_tls": tls.parse_upstream_tls(data["upstream_tls"], f"{path}: upstream_tls", base)
            if data.get("upstream_tls") else None,
        }
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
