"""TLS on both sides, with real processes: a TLS-only redis-server (`--port 0 --tls-port`), the
proxy with `tls:` and a `rediss://` upstream, redis-py with `ssl=True`; certificates made by the
test with `openssl` (tests/tls/certs.py)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.request

import pytest
import redis

from tests.servers import REPO, ProxyProcess, RedisServer, free_port, read_until_quiet, wait_for
from tests.tls.certs import Certs

pytestmark = pytest.mark.skipif(shutil.which("openssl") is None, reason="openssl is not installed")


@pytest.fixture(scope="session")
def certs(tmp_path_factory):
    return Certs(str(tmp_path_factory.mktemp("certs")))


def tls_redis(certs, cert=None, *extra: str) -> RedisServer:
    """A redis-server that speaks TLS only, asking for no client certificate."""
    port = free_port()
    cert, key = cert or certs.redis
    return RedisServer(port, "--port", "0", "--tls-port", str(port), "--tls-cert-file", cert,
                       "--tls-key-file", key, "--tls-ca-cert-file", certs.ca, "--tls-auth-clients", "no", *extra)


@pytest.fixture(scope="module")
def upstream(certs):
    server = tls_redis(certs)
    yield server
    server.close()


def write_config(folder, certs, auth_clients="yes", extra="", upstream_ca=None, server=None) -> str:
    """A configuration with both sides on TLS; paths relative to the configuration file."""
    for name in ("ca.crt", "other-ca.crt"):
        shutil.copy(os.path.join(certs.folder, name), folder / name)
    cert, key = server or certs.server
    shutil.copy(cert, folder / "server.crt")
    shutil.copy(key, folder / "server.key")
    text = f"""policy: none
tls:
  cert_file: server.crt
  key_file: server.key
  ca_cert_file: ca.crt
  auth_clients: {auth_clients}
  protocols: "TLSv1.2 TLSv1.3"
upstream_tls:
  ca_cert_file: {upstream_ca or "ca.crt"}
{extra}"""
    (folder / "config.yaml").write_text(text)
    return str(folder / "config.yaml")


def client(port: int, certs, cert=None, **extra) -> redis.Redis:
    cert, key = cert if cert is not None else (None, None)
    return redis.Redis(port=port, ssl=True, ssl_ca_certs=certs.ca, ssl_certfile=cert, ssl_keyfile=key,
                       socket_timeout=5, **extra)


def upstream_url(server) -> str:
    return f"rediss://127.0.0.1:{server.port}"


def metric(port: int, name: str) -> dict[str, float]:
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    found = {}
    for line in text.splitlines():
        if line.startswith(name):
            series, _, value = line.rpartition(" ")
            found[series] = float(value)
    return found


def test_both_sides_tls_with_a_client_certificate(tmp_path, certs, upstream):
    metrics = free_port()
    proxy = ProxyProcess(upstream_url(upstream), write_config(tmp_path, certs), "--metrics", str(metrics))
    try:
        conn = client(proxy.port, certs, certs.client)
        assert conn.set("tls:key", "value") is True
        assert conn.get("tls:key") == b"value"
        # through the proxy, the upstream connection is TLS too: Redis only listens on TLS
        assert conn.execute_command("CLIENT", "INFO") is not None
        conn.close()
        # the readiness probe reaches the upstream with the same settings
        wait_for(lambda: urllib.request.urlopen(f"http://127.0.0.1:{metrics}/ready", timeout=5).status == 200, 10,
                 "/ready")
        expiry = metric(metrics, "redis_guard_tls_certificate_expiry_seconds")
        (when,) = [value for series, value in expiry.items() if 'side="server"' in series]
        assert time.time() + 20 * 86400 < when < time.time() + 31 * 86400
    finally:
        assert proxy.stop() == 0


@pytest.mark.parametrize("which", ["none", "rogue", "expired"])
def test_a_required_client_certificate_missing_or_bad_is_refused(tmp_path, certs, upstream, which):
    metrics = free_port()
    proxy = ProxyProcess(upstream_url(upstream), write_config(tmp_path, certs), "--metrics", str(metrics))
    try:
        cert = {"none": None, "rogue": certs.rogue_client, "expired": certs.expired_client}[which]
        bad = client(proxy.port, certs, cert)
        with pytest.raises((redis.ConnectionError, redis.TimeoutError)):
            bad.ping()  # TLS 1.3: the refusal arrives at the first read
        # nothing served to it, the proxy goes on serving the others
        good = client(proxy.port, certs, certs.client)
        assert good.ping() is True
        failures = wait_for(lambda: metric(metrics, "redis_guard_tls_handshake_failures_total") or None, 5,
                            "the handshake failure counted")
        reasons = {series.partition('reason="')[2].partition('"')[0] for series in failures}
        assert reasons <= {"no_client_certificate", "bad_certificate"} and reasons
        assert "Traceback" not in proxy.log and " ERROR " not in proxy.log  # refused quietly
    finally:
        assert proxy.stop() == 0


def test_optional_client_certificates(tmp_path, certs, upstream):
    proxy = ProxyProcess(upstream_url(upstream), write_config(tmp_path, certs, auth_clients="optional"))
    try:
        assert client(proxy.port, certs).ping() is True
        assert client(proxy.port, certs, certs.client).ping() is True
        with pytest.raises(redis.ConnectionError):  # one presented must still be good
            client(proxy.port, certs, certs.rogue_client).ping()
    finally:
        assert proxy.stop() == 0


def test_a_plain_text_client_on_the_tls_port_is_refused(tmp_path, certs, upstream):
    metrics = free_port()
    proxy = ProxyProcess(upstream_url(upstream), write_config(tmp_path, certs, auth_clients="no"),
                         "--metrics", str(metrics), "--log-level", "debug")
    try:
        sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
        sock.sendall(b"*1\r\n$4\r\nPING\r\n")
        data, closed = read_until_quiet(sock, timeout=5)
        sock.close()
        assert b"PONG" not in data and closed
        failures = wait_for(lambda: metric(metrics, "redis_guard_tls_handshake_failures_total") or None, 5,
                            "the handshake failure counted")
        assert any('reason="plaintext"' in series for series in failures), failures
        assert "TLS handshake refused (plaintext)" in proxy.log
        assert client(proxy.port, certs).ping() is True
    finally:
        assert proxy.stop() == 0


def test_a_plain_listener_beside_the_tls_one(tmp_path, certs, upstream):
    tls_port = free_port()
    proxy = ProxyProcess(upstream_url(upstream),
                         write_config(tmp_path, certs, auth_clients="no", extra=f"tls_listen: {tls_port}\n"))
    try:
        plain = redis.Redis(port=proxy.port, socket_timeout=5)
        assert plain.ping() is True  # `listen` stays plain
        secure = client(tls_port, certs)
        assert secure.ping() is True
        assert f"TLS on 127.0.0.1:{tls_port}" in proxy.log
        proxy.process.send_signal(signal.SIGUSR1)  # the sessions, and how many over TLS
        wait_for(lambda: "2 client sessions" in proxy.log and "1 of them over TLS" in proxy.log, 10,
                 "the SIGUSR1 lines")
    finally:
        assert proxy.stop() == 0


def test_workers_share_the_tls_port(tmp_path, certs, upstream):
    metrics = free_port()
    proxy = ProxyProcess(upstream_url(upstream), write_config(tmp_path, certs, auth_clients="no"),
                         "--workers", "2", "--metrics", str(metrics))
    try:
        for _ in range(6):
            assert client(proxy.port, certs).ping() is True
        expiry = metric(metrics, "redis_guard_tls_certificate_expiry_seconds")
        (when,) = expiry.values()  # the same time in both workers, not their sum
        assert time.time() < when < time.time() + 31 * 86400
    finally:
        assert proxy.stop() == 0


def test_a_certificate_file_that_does_not_load_stops_the_start(tmp_path, certs, upstream):
    config = write_config(tmp_path, certs, auth_clients="no")
    (tmp_path / "server.key").write_text("not a key\n")
    done = subprocess.run([sys.executable, "-m", "proxy", "serve", "--config", config, "--listen", "127.0.0.1:0",
                           "--upstream", upstream_url(upstream)], cwd=REPO, capture_output=True, text=True,
                          timeout=60)
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "server.crt" in done.stderr and "do not load" in done.stderr


def test_flags_give_the_tls_settings(tmp_path, certs, upstream):
    cert, key = certs.server
    proxy = ProxyProcess(upstream_url(upstream), os.path.join(os.path.dirname(__file__), "..", "..", "configs",
                                                             "passthrough.yaml"),
                         "--tls-cert-file", cert, "--tls-key-file", key, "--tls-auth-clients", "no",
                         "--upstream-tls-ca-cert-file", certs.ca)
    try:
        assert client(proxy.port, certs).ping() is True
    finally:
        assert proxy.stop() == 0


@pytest.mark.parametrize("which", ["rogue", "expired"])
def test_an_upstream_with_a_bad_certificate_is_not_served(tmp_path, certs, which):
    server = tls_redis(certs, certs.rogue_server if which == "rogue" else certs.expired_server)
    try:
        # The proxy starts (as with an upstream not there yet) and says why it cannot reach it;
        # its clients get errors, nothing from that server.
        proxy = ProxyProcess(upstream_url(server), write_config(tmp_path, certs, auth_clients="no"))
        try:
            with pytest.raises(redis.RedisError):
                client(proxy.port, certs).set("k", "v")
            why = "certificate has expired" if which == "expired" else "unable to get local issuer"
            wait_for(lambda: why in proxy.log and "certificate verify failed" in proxy.log, 10,
                     "the reason logged")
        finally:
            assert proxy.stop() == 0
    finally:
        server.close()


def test_an_upstream_without_verification(tmp_path, certs):
    server = tls_redis(certs, certs.rogue_server)
    try:
        proxy = ProxyProcess(upstream_url(server), write_config(
            tmp_path, certs, auth_clients="no", extra="  verify: false\n"))
        try:
            assert client(proxy.port, certs).ping() is True
        finally:
            assert proxy.stop() == 0
    finally:
        server.close()


def test_an_upstream_that_asks_for_a_client_certificate(tmp_path, certs):
    port = free_port()
    cert, key = certs.redis
    server = RedisServer(port, "--port", "0", "--tls-port", str(port), "--tls-cert-file", cert, "--tls-key-file", key,
                         "--tls-ca-cert-file", certs.ca, "--tls-auth-clients", "yes")
    try:
        proxy = ProxyProcess(upstream_url(server), write_config(tmp_path, certs, auth_clients="no"))
        try:  # no certificate given: Redis refuses the proxy's connections
            with pytest.raises(redis.RedisError):
                client(proxy.port, certs).set("k", "v")
        finally:
            assert proxy.stop() == 0
        client_cert, client_key = certs.client
        config = write_config(tmp_path, certs, auth_clients="no",
                              extra=f"  cert_file: {client_cert}\n  key_file: {client_key}\n")
        proxy = ProxyProcess(upstream_url(server), config)
        try:
            assert client(proxy.port, certs).set("k", "v") is True
        finally:
            assert proxy.stop() == 0
    finally:
        server.close()


def served_name(port: int, certs) -> str:
    context = ssl.create_default_context(cafile=certs.ca)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with context.wrap_socket(raw, server_hostname="localhost") as sock:
            return dict(item[0] for item in sock.getpeercert()["subject"])["commonName"]


def test_a_certificate_rotated_under_traffic(tmp_path, certs, upstream):
    proxy = ProxyProcess(upstream_url(upstream), write_config(tmp_path, certs, auth_clients="no"))
    try:
        assert served_name(proxy.port, certs) == "redis-guard-test"
        busy = client(proxy.port, certs)
        assert busy.ping() is True
        # a broken file keeps the old certificate, and says why
        (tmp_path / "server.crt").write_text("not a certificate\n")
        wait_for(lambda: "TLS certificates not reloaded" in proxy.log, 10, "the failed reload logged")
        assert served_name(proxy.port, certs) == "redis-guard-test"
        # cert-manager's rotation: both files replaced, no restart
        shutil.copy(certs.server2[1], tmp_path / "server.key")
        shutil.copy(certs.server2[0], tmp_path / "server.crt")
        deadline = time.monotonic() + 15
        served = 0
        while served_name(proxy.port, certs) != "redis-guard-rotated":
            assert busy.incr("rotation:count") == served + 1  # the open connection goes on
            served += 1
            assert time.monotonic() < deadline, proxy.log
            time.sleep(0.05)
        assert busy.incr("rotation:count") == served + 1
        assert client(proxy.port, certs).ping() is True
    finally:
        assert proxy.stop() == 0


APPS_POLICY = """
name: shop
auth: required
applications:
  checkout:
    password_hash: "{hash}"
    prefixes: ["shop:order:"]
rules:
  K7: {{}}
"""


def test_a_client_certificate_names_its_application(tmp_path, certs, upstream):
    from proxy.policy.passwords import hash_password

    (tmp_path / "policy.yaml").write_text(APPS_POLICY.format(hash=hash_password(b"pw", log_n=10)))
    config = write_config(tmp_path, certs, auth_clients="optional")
    config_text = open(config).read().replace("policy: none", "policy: policy.yaml").replace(
        "  auth_clients: optional\n", "  auth_clients: optional\n  auth_clients_user: CN\n")
    open(config, "w").write(config_text)
    proxy = ProxyProcess(upstream_url(upstream), config)
    try:
        checkout = client(proxy.port, certs, certs.client_cert("checkout"))
        assert checkout.set("shop:order:1", "x") is True  # no AUTH: the certificate said who
        with pytest.raises(redis.ResponseError, match="K7"):
            checkout.set("other:1", "x")
        stranger = client(proxy.port, certs, certs.client_cert("nobody"))
        with pytest.raises(redis.AuthenticationError):
            stranger.get("shop:order:1")
        anonymous = client(proxy.port, certs, username="checkout", password="pw")
        assert anonymous.get("shop:order:1") == b"x"  # AUTH as before
    finally:
        assert proxy.stop() == 0


def test_the_audit_scans_a_tls_upstream(tmp_path, certs, upstream):
    config = write_config(tmp_path, certs, auth_clients="no")
    direct = redis.Redis(port=upstream.port, ssl=True, ssl_ca_certs=certs.ca)
    direct.set("Audit Key With Spaces", "x")
    done = subprocess.run([sys.executable, "-m", "proxy", "audit", "--config", config, "--policy",
                           os.path.join(REPO, "configs", "policies", "strict-dotted.yaml"),
                           "--upstream", upstream_url(upstream), "--json", "-", "--quiet"],
                          cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode in (0, 1), done.stderr
    assert json.loads(done.stdout)["keys"]["scanned"] >= 1


def test_a_sentinel_managed_master_with_tls_everywhere(tmp_path, certs):
    master = tls_redis(certs)
    port = free_port()
    cert, key = certs.redis
    conf = tmp_path / "sentinel.conf"
    conf.write_text(f"port 0\ntls-port {port}\nbind 127.0.0.1\ndir {tmp_path}\ntls-cert-file {cert}\n"
                    f"tls-key-file {key}\ntls-ca-cert-file {certs.ca}\ntls-auth-clients no\ntls-replication yes\n"
                    f"sentinel monitor tlsmaster 127.0.0.1 {master.port} 1\n")
    sentinel = subprocess.Popen(["redis-server", str(conf), "--sentinel"], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: redis.Redis(port=port, ssl=True, ssl_ca_certs=certs.ca, socket_timeout=2).execute_command(
            "SENTINEL", "GET-MASTER-ADDR-BY-NAME", "tlsmaster"), 10, "the sentinel")
        config = write_config(tmp_path, certs, auth_clients="no")
        with open(config, "a") as handle:
            handle.write(f"upstream_sentinel: {{master: tlsmaster, sentinels: '127.0.0.1:{port}', tls: true, "
                         f"sentinel_tls: true}}\n")
        proxy = ProxyProcess(None, config)
        try:
            conn = client(proxy.port, certs)
            assert conn.set("sentinel:key", "v") is True
            assert redis.Redis(port=master.port, ssl=True, ssl_ca_certs=certs.ca).get("sentinel:key") == b"v"
        finally:
            assert proxy.stop() == 0
    finally:
        sentinel.terminate()
        sentinel.wait(10)
        master.close()
