#include "server/tls.h"

#include <openssl/err.h>

namespace linkfit::server::tls {

std::string OpenSslErrors() {
  std::string text;
  while (const unsigned long code = ERR_get_error()) {
    char buffer[256];
    ERR_error_string_n(code, buffer, sizeof(buffer));
    if (!text.empty()) text += "; ";
    text += buffer;
  }
  return text.empty() ? "unknown OpenSSL error" : text;
}

bool ConfigureTls(SSL_CTX& ctx, const TlsOptions& tls, std::string& error) {
  ERR_clear_error();
  SSL_CTX_set_min_proto_version(&ctx, TLS1_2_VERSION);
  SSL_CTX_set_options(&ctx, SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
  if (SSL_CTX_use_certificate_chain_file(&ctx, tls.cert_file.c_str()) != 1) {
    error = "cannot load TLS certificate chain " + tls.cert_file + ": " + OpenSslErrors();
    return false;
  }
  if (SSL_CTX_use_PrivateKey_file(&ctx, tls.key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
    error = "cannot load TLS private key " + tls.key_file + ": " + OpenSslErrors();
    return false;
  }
  if (SSL_CTX_check_private_key(&ctx) != 1) {
    error = "TLS private key " + tls.key_file + " does not match certificate " + tls.cert_file;
    return false;
  }
  if (!tls.client_ca_file.empty()) {
    if (SSL_CTX_load_verify_locations(&ctx, tls.client_ca_file.c_str(), nullptr) != 1) {
      error = "cannot load TLS client CA " + tls.client_ca_file + ": " + OpenSslErrors();
      return false;
    }
    // Names the acceptable CAs in the CertificateRequest, so clients pick the right cert.
    if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(tls.client_ca_file.c_str())) {
      SSL_CTX_set_client_CA_list(&ctx, names);
    }
    int mode = SSL_VERIFY_PEER;
    if (tls.require_client_cert) mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT;
    SSL_CTX_set_verify(&ctx, mode, nullptr);
  }
  return true;
}

}  // namespace linkfit::server::tls
