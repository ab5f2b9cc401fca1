"""The configuration `serve` runs with: the YAML file (`--config`) with the command line's flags
over it, checked as a whole (ConfigError, or ValueError for a TLS file that does not load). A
Sentinel's master is asked for here, so the configuration names the server to connect to."""

from __future__ import annotations

import dataclasses
import os

from .. import tls
from ..config import (
    ConfigError,
    check_face,
    load_config,
    parse_address,
    parse_cluster_seeds,
    parse_face,
    parse_policy,
    parse_sentinel,
    parse_switch,
    parse_upstream,
)
from .upstream import configure_upstream_tls, find_sentinel_master

TLS_FLAGS = ("cert_file", "key_file", "ca_cert_file", "auth_clients", "protocols", "ciphers", "ciphersuites",
             "auth_clients_user")  # ciphersuites: refused with a reason (proxy/tls.py)
UPSTREAM_TLS_FLAGS = ("ca_cert_file", "cert_file", "key_file", "server_name", "verify")


def config_from_args(args):
    """The configuration of `serve`'s arguments (argparse's namespace, cli.py)."""
    config = load_config(args.config)
    if args.listen:
        config = config.replace(listen=parse_address(args.listen, 6380))
    if args.upstream:
        config = config.replace(upstream=parse_upstream(args.upstream), upstream_cluster=(),
                                upstream_sentinel=None)
    if args.upstream_cluster:
        config = config.replace(upstream_cluster=parse_cluster_seeds(args.upstream_cluster), upstream_sentinel=None)
    if args.upstream_sentinel:
        config = config.replace(upstream_sentinel=parse_sentinel(args.upstream_sentinel, "--upstream-sentinel"),
                                upstream_cluster=())
    if args.face:
        config = config.replace(face=parse_face(args.face))
    check_face(config)  # (before a Sentinel is asked for its master)
    config = tls_flags(config, args)
    configure_upstream_tls(config)
    if config.tls is not None:  # its files load, or the proxy does not start (ValueError)
        tls.server_context(config.tls)
    if config.upstream_sentinel is not None:
        config = find_sentinel_master(config)
    if config.upstream_cluster:
        # The first seed names the cluster in logs and lends its credentials to every node.
        config = config.replace(upstream=config.upstream_cluster[0])
    if args.workers is not None:
        if args.workers < 1:
            raise ConfigError("--workers must be at least 1")
        config = config.replace(workers=args.workers)
    if config.workers > 1 and config.tls_listen is not None and config.tls_listen.port == 0:
        raise ConfigError("tls_listen: give a port with more than one worker (each would pick its own)")
    if args.policy:
        config = config.replace(policy=parse_policy(args.policy))
    if args.shadow_policy:
        config = config.replace(shadow_policy=os.path.abspath(args.shadow_policy))
    if args.learn:
        config = config.replace(learn=os.path.abspath(args.learn))
    if args.upstream_acl is not None:
        config = config.replace(upstream_acl=parse_switch(args.upstream_acl, "--upstream-acl"))
    if args.metrics:
        config = config.replace(metrics=parse_address(args.metrics, 9121))
    return config


def flag_section(args, prefix: str, names, current) -> dict | None:
    """The `--<prefix>*` flags given over the fields of `current` (a parsed section, or None), as
    the YAML section they amount to; None when no such flag is given."""
    given = {key: getattr(args, prefix + key) for key in names if getattr(args, prefix + key) is not None}
    if not given:
        return None
    section = dataclasses.asdict(current) if current is not None else {}
    section = {key: " ".join(value) if isinstance(value, tuple) else value  # (protocols, as written in YAML)
               for key, value in section.items()}
    section.update(given)
    return {key: value for key, value in section.items() if value is not None}


def tls_flags(config, args):
    """`--tls-*` and `--upstream-tls-*` override the fields of `tls:` / `upstream_tls:`."""
    if args.tls_listen:
        config = config.replace(tls_listen=parse_address(args.tls_listen, 6380))
    try:
        section = flag_section(args, "tls_", TLS_FLAGS, config.tls)
        if section is not None:
            config = config.replace(tls=tls.parse_server_tls(section, "--tls"))
        section = flag_section(args, "upstream_tls_", UPSTREAM_TLS_FLAGS, config.upstream_tls)
        if section is not None:
            if args.upstream_tls_verify is not None:
                section["verify"] = parse_switch(args.upstream_tls_verify, "--upstream-tls-verify")
            config = config.replace(upstream_tls=tls.parse_upstream_tls(section, "--upstream-tls"))
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if config.tls_listen is not None and config.tls is None:
        raise ConfigError("tls_listen needs the tls settings (cert_file, key_file)")
    return config
