#pragma once

// TestPki: a throwaway certificate authority for HTTPS tests, generated at run time with the
// OpenSSL C API (EC P-256 keys, SHA-256 signatures), so that no key material is checked in and
// nothing expires in the repository.
//
//   ca.crt                  the CA (basicConstraints CA:TRUE, keyCertSign)
//   server.crt, server.key  signed by the CA, subjectAltName IP:127.0.0.1 and DNS:localhost,
//                           extendedKeyUsage serverAuth
//   client.crt, client.key  signed by the CA, CN "linkfit-test-client", O "system:masters",
//                           extendedKeyUsage clientAuth (the API server's x509 user)
//
// The files are written into a directory (a fresh one under $TMPDIR, or one the caller names);
// keys are written with mode 0600. Certificates are valid from an hour ago for a week.
//
// Thread-safety: a TestPki is immutable after Create(); every const method may be called from
// any thread. IssueClientCertificate() uses only the CA and may also be called concurrently.

#include <memory>
#include <string>

#include "linkfit/common/result.h"

namespace linkfit::testing {

// A certificate and its private key, both PEM.
struct PemPair {
  std::string cert;
  std::string key;
};

class TestPki;
using TestPkiPtr = std::unique_ptr<TestPki>;

class TestPki {
 public:
  // Generates the CA, the server and the client pairs and writes them into `dir` (created when
  // missing, kept on destruction), or, when `dir` is empty, into a fresh temporary directory that
  // the destructor removes.
  static Result<TestPkiPtr> Create(const std::string& dir = "");

  TestPki(const TestPki&) = delete;
  TestPki& operator=(const TestPki&) = delete;
  ~TestPki();

  const std::string& dir() const { return dir_; }
  const std::string& ca_cert_pem() const { return ca_.cert; }
  const std::string& server_cert_pem() const { return server_.cert; }
  const std::string& server_key_pem() const { return server_.key; }
  const std::string& client_cert_pem() const { return client_.cert; }
  const std::string& client_key_pem() const { return client_.key; }

  std::string ca_cert_path() const { return dir_ + "/ca.crt"; }
  std::string server_cert_path() const { return dir_ + "/server.crt"; }
  std::string server_key_path() const { return dir_ + "/server.key"; }
  std::string client_cert_path() const { return dir_ + "/client.crt"; }
  std::string client_key_path() const { return dir_ + "/client.key"; }

  // Returns a new client certificate signed by this CA for user `common_name` (not written to
  // disk).
  Result<PemPair> IssueClientCertificate(const std::string& common_name) const;

  // Returns a self-signed client certificate no TestPki trusts (for "wrong CA" tests).
  static Result<PemPair> UntrustedClientCertificate(const std::string& common_name);

 private:
  TestPki() = default;

  std::string dir_;
  bool owns_dir_ = false;
  PemPair ca_;
  PemPair server_;
  PemPair client_;
};

}  // namespace linkfit::testing
