#pragma once

// Internal to module `kube`: PEM text -> OpenSSL objects, for the API client's TLS material and
// for the kubeconfig loader's checks (a certificate or key that does not parse is an error there,
// naming the file and the key, rather than a handshake failure later).
//
// Thread-safety: pure functions; the returned objects are owned by the caller.

#include <openssl/evp.h>
#include <openssl/x509.h>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "linkfit/common/result.h"

namespace linkfit::kube {

struct X509Free {
  void operator()(X509* cert) const { X509_free(cert); }
};
struct EvpPkeyFree {
  void operator()(EVP_PKEY* key) const { EVP_PKEY_free(key); }
};
using X509Ptr = std::unique_ptr<X509, X509Free>;
using EvpPkeyPtr = std::unique_ptr<EVP_PKEY, EvpPkeyFree>;

// Every certificate in `pem`, in order (a CA bundle holds several). Fails, naming `what`, when
// none can be read.
Result<std::vector<X509Ptr>> ParsePemCertificates(std::string_view pem, const std::string& what);

// The private key in `pem` (PKCS#8, PKCS#1 or SEC1, unencrypted).
Result<EvpPkeyPtr> ParsePemPrivateKey(std::string_view pem, const std::string& what);

}  // namespace linkfit::kube
