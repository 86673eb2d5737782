"""The sim's certificates (conformance.controlplane.pki): the front proxy's CA and the clients'
CA must not share a name, and certificates name their issuer's key. Otherwise the API server
verifies every request's client certificate against both CAs (~12 % of a busy sim API
server's CPU, measured)."""

from __future__ import annotations

from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import rsa

from conformance.controlplane.components import FRONT_PROXY_CA
from conformance.controlplane.pki import ClusterPKI


def _load(path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_the_front_proxy_ca_is_not_taken_for_the_clients_ca(tmp_path) -> None:
    clients = ClusterPKI(tmp_path / "pki")
    front = ClusterPKI(tmp_path / "pki" / "front-proxy", FRONT_PROXY_CA)
    admin = _load(clients.issue("admin", "kubernetes-admin", client=True).cert)
    assert _load(front.ca.cert).subject != admin.issuer == _load(clients.ca.cert).subject


def test_certificates_name_their_issuers_rsa_key_as_kubeadm_does(tmp_path) -> None:
    pki = ClusterPKI(tmp_path)
    ca = _load(pki.ca.cert)
    leaf = _load(pki.issue("apiserver", "kube-apiserver", server=True, hosts=("127.0.0.1",)).cert)
    assert isinstance(ca.public_key(), rsa.RSAPublicKey)
    skid = ca.extensions.get_extension_for_class(x509.SubjectKeyIdentifier).value.digest
    akid = leaf.extensions.get_extension_for_class(x509.AuthorityKeyIdentifier).value
    assert akid.key_identifier == skid
    leaf.verify_directly_issued_by(ca)
