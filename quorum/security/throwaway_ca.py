"""A throwaway certificate authority for ``sparkraft demo --secure`` and local experiments: a CA and
PEM key stores in Kafka's form (key + chain in one file), made with ``cryptography``.

Not for production: keys are unencrypted files and certificates are valid for 127.0.0.1 and
localhost only. The CA's own key is never written, so nothing more is issued once the process ends.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from pathlib import Path

VALID_DAYS = 30


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                             serialization.NoEncryption())


class ThrowawayCa:
    """``ca.pem`` (the trust store) in ``root``, and ``keystore(cn)`` files issued by it."""

    def __init__(self, root: Path, organization: str = "sparkraft demo"):
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import NameOID

        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.organization = organization
        self._key = _key()
        name = x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization),
                          x509.NameAttribute(NameOID.COMMON_NAME, f"{organization} CA")])
        now = datetime.datetime.now(datetime.timezone.utc)
        self._cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name)
                      .public_key(self._key.public_key()).serial_number(x509.random_serial_number())
                      .not_valid_before(now - datetime.timedelta(minutes=5))
                      .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
                      .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
                      .add_extension(x509.KeyUsage(digital_signature=False, content_commitment=False,
                                                   key_encipherment=False, data_encipherment=False,
                                                   key_agreement=False, key_cert_sign=True, crl_sign=True,
                                                   encipher_only=False, decipher_only=False), critical=True)
                      .sign(self._key, hashes.SHA256()))
        self._issued: dict[str, Path] = {}
        self.truststore = root / "ca.pem"
        self.truststore.write_bytes(self._cert.public_bytes(serialization.Encoding.PEM))

    def keystore(self, cn: str) -> Path:
        """``root/<cn>.pem``: a key and a certificate for ``CN=<cn>,O=<organization>``, valid for
        127.0.0.1 and localhost, as a server and as a client; readable by its owner only. Issued once
        per name by this CA."""
        if cn in self._issued:
            return self._issued[cn]
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        key = _key()
        now = datetime.datetime.now(datetime.timezone.utc)
        cert = (x509.CertificateBuilder()
                # issuer-to-leaf order, so the RFC 2253 name reads CN=<cn>,O=<organization>
                .subject_name(x509.Name([x509.NameAttribute(NameOID.ORGANIZATION_NAME, self.organization),
                                         x509.NameAttribute(NameOID.COMMON_NAME, cn)]))
                .issuer_name(self._cert.subject).public_key(key.public_key())
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=5))
                .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
                .add_extension(x509.SubjectAlternativeName([x509.DNSName("localhost"),
                                                            x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
                               critical=False)
                .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH,
                                                      ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
                .sign(self._key, hashes.SHA256()))
        path = self.root / f"{cn}.pem"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(_pem_key(key) + cert.public_bytes(serialization.Encoding.PEM))
        self._issued[cn] = path
        return path


def main(argv=None) -> None:
    """``python -m quorum.security.throwaway_ca DIR CN...``: a CA and one key store per name in DIR
    (what conf/secure/ expects in /tmp/sparkraft-secure/pki)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m quorum.security.throwaway_ca", description=main.__doc__)
    parser.add_argument("dir", type=Path)
    parser.add_argument("names", nargs="+", metavar="CN")
    args = parser.parse_args(argv)
    ca = ThrowawayCa(args.dir)
    for cn in args.names:
        print(ca.keystore(cn))
    print(ca.truststore)


if __name__ == "__main__":
    main()
