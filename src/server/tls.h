#pragma once

// The server's TLS set-up with OpenSSL (server.cc wraps the context in Asio's ssl::context).
//
// Thread-safety: OpenSslErrors reads the calling thread's OpenSSL error queue; ConfigureTls
// changes only `ctx`.

#include <string>

#include <openssl/ssl.h>

#include "linkfit/server/server.h"

namespace linkfit::server::tls {

// The calling thread's queued OpenSSL errors as one line (and clears them).
std::string OpenSslErrors();

// Loads the certificate, key and (optionally) the client CA into `ctx`. Returns false with
// `error` set when a file cannot be used.
bool ConfigureTls(SSL_CTX& ctx, const TlsOptions& options, std::string& error);

}  // namespace linkfit::server::tls
