"""Certificates for the TLS tests, made with the machine's `openssl`: a CA, a server certificate
for 127.0.0.1/localhost, client certificates by common name, an expired one and one signed by
another CA."""

from __future__ import annotations

import os
import shutil
import subprocess


def _run(*args: str, cwd: str) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_ca(folder: str, name: str) -> None:
    _run("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "30", "-subj", f"/CN={name}",
         "-keyout", f"{name}.key", "-out", f"{name}.crt", cwd=folder)


def make_cert(folder: str, name: str, cn: str, ca: str = "ca", server: bool = False,
              expired: bool = False) -> tuple[str, str]:
    """(cert, key) paths; signed by `ca`; `expired`: valid for a day ending yesterday."""
    _run("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", f"/CN={cn}", "-keyout", f"{name}.key",
         "-out", f"{name}.csr", cwd=folder)
    ext = os.path.join(folder, f"{name}.ext")
    with open(ext, "w") as handle:
        handle.write("basicConstraints=CA:FALSE\n")
        if server:
            handle.write("subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth,clientAuth\n")
        else:
            handle.write("extendedKeyUsage=clientAuth,serverAuth\n")
    if expired:  # `openssl x509 -not_before/-not_after` is 3.4+: sign with `ca` and a past window
        config = os.path.join(folder, f"{name}.cnf")
        os.makedirs(os.path.join(folder, "db"), exist_ok=True)
        index = os.path.join(folder, "db", "index.txt")
        open(index, "a").close()
        with open(config, "w") as handle:
            handle.write(f"""[ ca ]
default_ca = CA_default
[ CA_default ]
database = {index}
new_certs_dir = {os.path.join(folder, "db")}
serial = {os.path.join(folder, "db", "serial")}
default_md = sha256
policy = any
unique_subject = no
[ any ]
commonName = supplied
""")
        if not os.path.exists(os.path.join(folder, "db", "serial")):
            with open(os.path.join(folder, "db", "serial"), "w") as handle:
                handle.write("1000\n")
        _run("ca", "-batch", "-config", config, "-cert", f"{ca}.crt", "-keyfile", f"{ca}.key",
             "-startdate", "20200101000000Z", "-enddate", "20200102000000Z", "-extfile", ext,
             "-in", f"{name}.csr", "-out", f"{name}.crt", "-notext", cwd=folder)
    else:
        _run("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.crt", "-CAkey", f"{ca}.key",
             "-CAcreateserial", "-days", "30", "-extfile", ext, "-out", f"{name}.crt", cwd=folder)
    return os.path.join(folder, f"{name}.crt"), os.path.join(folder, f"{name}.key")


class Certs:
    """Every file the tests use, in one folder."""

    def __init__(self, folder: str):
        if shutil.which("openssl") is None:
            raise RuntimeError("openssl is not installed")
        self.folder = folder
        make_ca(folder, "ca")
        make_ca(folder, "other-ca")
        self.ca = os.path.join(folder, "ca.crt")
        self.other_ca = os.path.join(folder, "other-ca.crt")
        self.server = make_cert(folder, "server", "redis-guard-test", server=True)
        self.server2 = make_cert(folder, "server2", "redis-guard-rotated", server=True)
        self.redis = make_cert(folder, "redis", "redis-test", server=True)
        self.expired_server = make_cert(folder, "expired-server", "expired", server=True, expired=True)
        self.rogue_server = make_cert(folder, "rogue-server", "rogue", ca="other-ca", server=True)
        self.client = make_cert(folder, "client", "someone")
        self.expired_client = make_cert(folder, "expired-client", "expired", expired=True)
        self.rogue_client = make_cert(folder, "rogue-client", "rogue", ca="other-ca")

    def client_cert(self, cn: str) -> tuple[str, str]:
        name = "client-" + cn
        path = os.path.join(self.folder, name + ".crt")
        if not os.path.exists(path):
            make_cert(self.folder, name, cn)
        return path, os.path.join(self.folder, name + ".key")
