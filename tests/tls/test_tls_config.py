"""The `tls:` / `upstream_tls:` settings and the contexts built from them, without a server."""

from __future__ import annotations

import os
import shutil
import ssl

import pytest

from proxy import tls
from proxy.config import ConfigError, load_config, parse_upstream
from tests.tls.certs import Certs

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return Certs(str(tmp_path_factory.mktemp("certs")))


def config_file(tmp_path, text: str) -> str:
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return str(path)


def test_rediss_urls_ask_for_tls():
    assert parse_upstream("rediss://u:p@h:6390/2").tls is True
    assert parse_upstream("rediss://u:p@h:6390/2").url() == "rediss://u:***@h:6390/2"
    assert parse_upstream("redis://h:6390").tls is False
    with pytest.raises(ConfigError, match="rediss://"):
        parse_upstream("http://h:1")


def test_paths_are_relative_to_the_configuration_file(tmp_path):
    config = load_config(config_file(tmp_path, """tls:
  cert_file: certs/server.crt
  key_file: /abs/server.key
  ca_cert_file: ca.crt
  auth_clients: optional
  protocols: TLSv1.3
tls_listen: 6381
upstream_tls: {ca_cert_file: up.crt, server_name: redis.internal, verify: false}
"""))
    assert config.tls.cert_file == os.path.join(str(tmp_path), "certs/server.crt")
    assert config.tls.key_file == "/abs/server.key"
    assert config.tls.auth_clients == "optional" and config.tls.protocols == ("TLSv1.3",)
    assert config.tls_listen.port == 6381
    assert config.upstream_tls.ca_cert_file == os.path.join(str(tmp_path), "up.crt")
    assert config.upstream_tls.verify is False and config.upstream_tls.server_name == "redis.internal"


@pytest.mark.parametrize("text, message", [
    ("tls: {cert_file: a.crt}", "'cert_file' and 'key_file' are required"),
    ("tls: {cert_file: a, key_file: b, auth_clients: maybe, ca_cert_file: c}", "no, optional or yes"),
    ("tls: {cert_file: a, key_file: b}", "needs 'ca_cert_file'"),
    ("tls: {cert_file: a, key_file: b, auth_clients: no, protocols: SSLv3}", "protocol 'SSLv3'"),
    ("tls: {cert_file: a, key_file: b, auth_clients: no, auth_clients_user: CN}", "optional or yes"),
    ("tls: {cert_file: a, key_file: b, colour: red}", "unknown setting"),
    ("tls: {cert_file: a, key_file: b, auth_clients: no, ciphersuites: TLS_AES_128_GCM_SHA256}",
     "'ciphersuites' cannot be set"),
    ("upstream_tls: {verify: maybe}", "'verify' must be true or false"),
    ("upstream_tls: {cert_file: a}", "both 'cert_file' and 'key_file'"),
])
def test_bad_settings_are_named(tmp_path, text, message):
    with pytest.raises(ConfigError, match=message):
        load_config(config_file(tmp_path, text + "\n"))


def test_a_file_that_does_not_load_is_named(tmp_path, certs):
    (tmp_path / "bad.crt").write_text("garbage\n")
    settings = tls.ServerTLS(str(tmp_path / "bad.crt"), certs.server[1], auth_clients="no")
    with pytest.raises(ValueError, match="bad.crt"):
        tls.server_context(settings)
    with pytest.raises(ValueError, match="no such file"):
        tls.server_context(tls.ServerTLS(str(tmp_path / "missing.crt"), certs.server[1], auth_clients="no"))
    with pytest.raises(ValueError, match="do not load"):  # a key of another certificate
        tls.server_context(tls.ServerTLS(certs.server[0], certs.client[1], auth_clients="no"))


def test_a_reload_that_fails_keeps_the_old_context(tmp_path, certs):
    shutil.copy(certs.server[0], tmp_path / "s.crt")
    shutil.copy(certs.server[1], tmp_path / "s.key")
    holder = tls.ServerContexts(tls.ServerTLS(str(tmp_path / "s.crt"), str(tmp_path / "s.key"), certs.ca))
    assert holder.context.verify_mode == ssl.CERT_REQUIRED
    old = holder.context
    watcher = tls.TLSWatcher(holder)
    (tmp_path / "s.crt").write_text("broken")
    assert watcher.reload("test") is False and holder.context is old
    shutil.copy(certs.server2[0], tmp_path / "s.crt")
    shutil.copy(certs.server2[1], tmp_path / "s.key")
    assert watcher.reload("test") is True and holder.context is not old


def test_expiry_of_a_certificate(certs):
    assert tls.expiry(certs.expired_client[0]) == ssl.cert_time_to_seconds("Jan  2 00:00:00 2020 GMT")
    assert tls.expiry("/nonexistent") is None


def test_handshake_failure_reasons():
    assert tls._reason(ssl.SSLError(1, "[SSL: WRONG_VERSION_NUMBER] wrong version number")) == "plaintext"
    assert tls._reason(ssl.SSLError(1, "[SSL: HTTP_REQUEST] http request")) == "plaintext"
    assert tls._reason(ssl.SSLError(1, "[SSL: PEER_DID_NOT_RETURN_A_CERTIFICATE] peer did not return a "
                                       "certificate")) == "no_client_certificate"
    assert tls._reason(ssl.SSLError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")) == \
        "bad_certificate"
    assert tls._reason(ssl.SSLError(1, "[SSL: NO_SHARED_CIPHER] no shared cipher")) == "no_shared_cipher"


def test_ciphers_restrict_tls12(tmp_path, certs):
    settings = tls.ServerTLS(certs.server[0], certs.server[1], auth_clients="no", protocols=("TLSv1.2",),
                             ciphers="ECDHE-ECDSA-AES128-GCM-SHA256")
    context = tls.server_context(settings)
    assert {cipher["name"] for cipher in context.get_ciphers() if cipher["protocol"] == "TLSv1.2"} == \
        {"ECDHE-ECDSA-AES128-GCM-SHA256"}
    assert context.maximum_version == ssl.TLSVersion.TLSv1_2
    with pytest.raises(ValueError, match="none of them"):
        tls.server_context(tls.ServerTLS(certs.server[0], certs.server[1], auth_clients="no", ciphers="NOPE"))


def test_the_upstream_context_is_rebuilt_on_reload(tmp_path, certs):
    from proxy.config import Address

    shutil.copy(certs.client[0], tmp_path / "c.crt")
    shutil.copy(certs.client[1], tmp_path / "c.key")
    settings = tls.UpstreamTLS(certs.ca, str(tmp_path / "c.crt"), str(tmp_path / "c.key"))
    sentinel = Address("127.0.0.1", 26379)
    try:
        tls.configure_upstream(settings, True, plain=[sentinel])
        old = tls.upstream_context(Address("127.0.0.1", 6390))
        assert old is not None and tls.upstream_context(sentinel) is None
        assert tls.upstream_ssl(Address("127.0.0.1", 6390))["server_hostname"] == "127.0.0.1"
        watcher = tls.TLSWatcher(None)
        (tmp_path / "c.key").write_text("broken")
        assert watcher.reload("test") is False and tls.upstream_context(Address("h", 1)) is old
        shutil.copy(certs.client[1], tmp_path / "c.key")
        assert watcher.reload("test") is True and tls.upstream_context(Address("h", 1)) is not old
        tls.configure_upstream(None, True, only=[sentinel])  # TLS to the sentinels only
        assert tls.upstream_context(sentinel) is not None and tls.upstream_context(Address("h", 1)) is None
    finally:
        tls.configure_upstream(None, False)
