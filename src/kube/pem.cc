#include "kube/pem.h"

#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509v3.h>

#include <climits>

namespace linkfit::kube {
namespace {

struct BioFree {
  void operator()(BIO* bio) const { BIO_free(bio); }
};
using BioPtr = std::unique_ptr<BIO, BioFree>;

BioPtr MemoryBio(std::string_view text) {
  if (text.size() > static_cast<std::size_t>(INT_MAX)) return nullptr;
  return BioPtr(BIO_new_mem_buf(text.data(), static_cast<int>(text.size())));
}

// The first error OpenSSL queued, and the queue cleared.
std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  ERR_clear_error();
  if (code == 0) return "no PEM block of that kind";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

// Refuses passphrases: OpenSSL's default callback would prompt on the terminal for an encrypted
// key, which a daemon must never do.
int NoPassphrase(char* /*buffer*/, int /*size*/, int /*rwflag*/, void* /*user*/) { return 0; }

}  // namespace

Result<std::vector<X509Ptr>> ParsePemCertificates(std::string_view pem, const std::string& what) {
  BioPtr bio = MemoryBio(pem);
  if (bio == nullptr) return MakeError(what + ": cannot read the PEM text");
  std::vector<X509Ptr> certs;
  while (X509* cert = PEM_read_bio_X509(bio.get(), nullptr, NoPassphrase, nullptr)) {
    // Every connection's SSL context shares these certificates; OpenSSL computes a
    // certificate's extension cache lazily, on first use, without a lock for that first fill.
    // Filling it now, before any connection exists, keeps concurrent handshakes read-only.
    X509_check_purpose(cert, -1, 0);
    certs.emplace_back(cert);
  }
  // The loop ends with "no start line" at the end of the text: expected once something was read.
  const std::string error = OpenSslError();
  if (certs.empty()) return MakeError(what + " does not hold a PEM certificate (" + error + ")");
  return certs;
}

Result<EvpPkeyPtr> ParsePemPrivateKey(std::string_view pem, const std::string& what) {
  BioPtr bio = MemoryBio(pem);
  if (bio == nullptr) return MakeError(what + ": cannot read the PEM text");
  EvpPkeyPtr key(PEM_read_bio_PrivateKey(bio.get(), nullptr, NoPassphrase, nullptr));
  if (key == nullptr) {
    return MakeError(what + " does not hold an unencrypted PEM private key (" + OpenSslError() +
                     ")");
  }
  ERR_clear_error();
  return key;
}

}  // namespace linkfit::kube
