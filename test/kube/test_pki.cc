#include "kube/test_pki.h"

#include <sys/stat.h>

#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <system_error>
#include <vector>

#include <openssl/bio.h>
#include <openssl/buffer.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

namespace linkfit::testing {
namespace {

using PkeyPtr = std::unique_ptr<EVP_PKEY, decltype(&EVP_PKEY_free)>;
using X509Ptr = std::unique_ptr<X509, decltype(&X509_free)>;
using BioPtr = std::unique_ptr<BIO, decltype(&BIO_free)>;

constexpr long kSecondsPerHour = 3600;
constexpr long kValiditySeconds = 7 * 24 * kSecondsPerHour;

enum class CertRole { kCa, kServer, kClient };

// Returns the last OpenSSL error as text, for messages.
std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  if (code == 0) return "unknown OpenSSL error";
  char buffer[256];
  ERR_error_string_n(code, buffer, sizeof(buffer));
  return buffer;
}

Result<PkeyPtr> GenerateKey() {
  PkeyPtr key(EVP_PKEY_Q_keygen(nullptr, nullptr, "EC", "P-256"), EVP_PKEY_free);
  if (!key) return MakeError("generating an EC P-256 key: " + OpenSslError());
  return key;
}

// Reads the contents of a memory BIO.
std::string BioContents(BIO* bio) {
  BUF_MEM* memory = nullptr;
  // BIO_get_mem_ptr, spelled out: the macro casts in C style.
  BIO_ctrl(bio, BIO_C_GET_BUF_MEM_PTR, 0, reinterpret_cast<void*>(&memory));
  if (memory == nullptr) return "";
  return std::string(memory->data, memory->length);
}

Result<std::string> CertToPem(X509* cert) {
  BioPtr bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio || PEM_write_bio_X509(bio.get(), cert) != 1) {
    return MakeError("encoding a certificate: " + OpenSslError());
  }
  return BioContents(bio.get());
}

Result<std::string> KeyToPem(EVP_PKEY* key) {
  BioPtr bio(BIO_new(BIO_s_mem()), BIO_free);
  if (!bio ||
      PEM_write_bio_PrivateKey(bio.get(), key, nullptr, nullptr, 0, nullptr, nullptr) != 1) {
    return MakeError("encoding a private key: " + OpenSslError());
  }
  return BioContents(bio.get());
}

Result<X509Ptr> CertFromPem(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  X509Ptr cert(bio ? PEM_read_bio_X509(bio.get(), nullptr, nullptr, nullptr) : nullptr, X509_free);
  if (!cert) return MakeError("parsing a certificate: " + OpenSslError());
  return cert;
}

Result<PkeyPtr> KeyFromPem(const std::string& pem) {
  BioPtr bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())), BIO_free);
  PkeyPtr key(bio ? PEM_read_bio_PrivateKey(bio.get(), nullptr, nullptr, nullptr) : nullptr,
              EVP_PKEY_free);
  if (!key) return MakeError("parsing a private key: " + OpenSslError());
  return key;
}

Result<void> AddExtension(X509* cert, X509V3_CTX* context, int nid, const char* value) {
  X509_EXTENSION* extension = X509V3_EXT_conf_nid(nullptr, context, nid, value);
  if (extension == nullptr) {
    return MakeError(std::string("building extension ") + OBJ_nid2sn(nid) + "=" + value + ": " +
                     OpenSslError());
  }
  const int added = X509_add_ext(cert, extension, -1);
  X509_EXTENSION_free(extension);
  if (added != 1) return MakeError("adding an extension: " + OpenSslError());
  return {};
}

Result<void> AddNameEntry(X509_NAME* name, const char* field, const std::string& value) {
  if (X509_NAME_add_entry_by_txt(name, field, MBSTRING_UTF8,
                                 reinterpret_cast<const unsigned char*>(value.c_str()), -1, -1,
                                 0) != 1) {
    return MakeError(std::string("setting the subject's ") + field + ": " + OpenSslError());
  }
  return {};
}

// Builds a certificate for `subject_key` named `common_name` (and `organization` when not
// empty), signed by `issuer_key`; `issuer` is null for the self-signed CA.
Result<X509Ptr> MakeCertificate(EVP_PKEY* subject_key, const std::string& common_name,
                                const std::string& organization, CertRole role, X509* issuer,
                                EVP_PKEY* issuer_key) {
  X509Ptr cert(X509_new(), X509_free);
  if (!cert || X509_set_version(cert.get(), 2) != 1) {
    return MakeError("allocating a certificate: " + OpenSslError());
  }
  static std::mutex serial_mutex;
  static std::mt19937_64 serial_random{std::random_device{}()};
  uint64_t serial = 0;
  {
    std::lock_guard<std::mutex> lock(serial_mutex);
    serial = serial_random() >> 1;  // positive, as RFC 5280 requires
  }
  if (ASN1_INTEGER_set_uint64(X509_get_serialNumber(cert.get()), serial) != 1 ||
      X509_gmtime_adj(X509_getm_notBefore(cert.get()), -kSecondsPerHour) == nullptr ||
      X509_gmtime_adj(X509_getm_notAfter(cert.get()), kValiditySeconds) == nullptr ||
      X509_set_pubkey(cert.get(), subject_key) != 1) {
    return MakeError("filling a certificate: " + OpenSslError());
  }
  X509_NAME* subject = X509_get_subject_name(cert.get());
  if (!organization.empty()) {
    if (auto added = AddNameEntry(subject, "O", organization); !added)
      return tl::unexpected(added.error());
  }
  if (auto added = AddNameEntry(subject, "CN", common_name); !added)
    return tl::unexpected(added.error());
  X509* signer = issuer != nullptr ? issuer : cert.get();
  if (X509_set_issuer_name(cert.get(), X509_get_subject_name(signer)) != 1) {
    return MakeError("setting the issuer: " + OpenSslError());
  }

  X509V3_CTX context;
  X509V3_set_ctx(&context, signer, cert.get(), nullptr, nullptr, 0);
  std::vector<std::pair<int, const char*>> extensions;
  switch (role) {
    case CertRole::kCa:
      extensions = {{NID_basic_constraints, "critical,CA:TRUE"},
                    {NID_key_usage, "critical,keyCertSign,cRLSign,digitalSignature"},
                    {NID_subject_key_identifier, "hash"}};
      break;
    case CertRole::kServer:
      extensions = {{NID_basic_constraints, "critical,CA:FALSE"},
                    {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                    {NID_ext_key_usage, "serverAuth"},
                    {NID_subject_alt_name, "IP:127.0.0.1,DNS:localhost"},
                    {NID_subject_key_identifier, "hash"},
                    {NID_authority_key_identifier, "keyid:always"}};
      break;
    case CertRole::kClient:
      extensions = {{NID_basic_constraints, "critical,CA:FALSE"},
                    {NID_key_usage, "critical,digitalSignature,keyEncipherment"},
                    {NID_ext_key_usage, "clientAuth"},
                    {NID_subject_key_identifier, "hash"}};
      if (issuer != nullptr) extensions.emplace_back(NID_authority_key_identifier, "keyid:always");
      break;
  }
  for (const auto& [nid, value] : extensions) {
    if (auto added = AddExtension(cert.get(), &context, nid, value); !added) {
      return tl::unexpected(added.error());
    }
  }
  if (X509_sign(cert.get(), issuer_key, EVP_sha256()) == 0) {
    return MakeError("signing a certificate: " + OpenSslError());
  }
  return cert;
}

// Generates a key and a certificate signed by (`issuer`, `issuer_key`), or self-signed when
// `issuer` is null, and returns both as PEM.
Result<PemPair> MakePair(const std::string& common_name, const std::string& organization,
                         CertRole role, X509* issuer, EVP_PKEY* issuer_key) {
  PkeyPtr key(nullptr, EVP_PKEY_free);
  LINKFIT_ASSIGN_OR_RETURN(key, GenerateKey());
  X509Ptr cert(nullptr, X509_free);
  LINKFIT_ASSIGN_OR_RETURN(cert, MakeCertificate(key.get(), common_name, organization, role, issuer,
                                                 issuer_key != nullptr ? issuer_key : key.get()));
  PemPair pair;
  LINKFIT_ASSIGN_OR_RETURN(pair.cert, CertToPem(cert.get()));
  LINKFIT_ASSIGN_OR_RETURN(pair.key, KeyToPem(key.get()));
  return pair;
}

Result<void> WriteFile(const std::string& path, const std::string& contents, bool secret) {
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out << contents;
    if (!out) return MakeError("writing " + path);
  }
  if (secret && ::chmod(path.c_str(), S_IRUSR | S_IWUSR) != 0) {
    return MakeError("chmod 0600 " + path);
  }
  return {};
}

Result<std::string> MakeTempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string pattern =
      std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/linkfit-pki-XXXXXX";
  std::vector<char> buffer(pattern.begin(), pattern.end());
  buffer.push_back('\0');
  if (::mkdtemp(buffer.data()) == nullptr) return MakeError("mkdtemp " + pattern + " failed");
  return std::string(buffer.data());
}

}  // namespace

Result<TestPkiPtr> TestPki::Create(const std::string& dir) {
  TestPkiPtr pki(new TestPki());
  if (dir.empty()) {
    LINKFIT_ASSIGN_OR_RETURN(pki->dir_, MakeTempDir());
    pki->owns_dir_ = true;
  } else {
    std::error_code error;
    std::filesystem::create_directories(dir, error);
    if (error) return MakeError("creating " + dir + ": " + error.message());
    pki->dir_ = dir;
  }

  LINKFIT_ASSIGN_OR_RETURN(pki->ca_,
                           MakePair("linkfit-test-ca", "", CertRole::kCa, nullptr, nullptr));
  X509Ptr ca_cert(nullptr, X509_free);
  LINKFIT_ASSIGN_OR_RETURN(ca_cert, CertFromPem(pki->ca_.cert));
  PkeyPtr ca_key(nullptr, EVP_PKEY_free);
  LINKFIT_ASSIGN_OR_RETURN(ca_key, KeyFromPem(pki->ca_.key));
  LINKFIT_ASSIGN_OR_RETURN(
      pki->server_, MakePair("localhost", "", CertRole::kServer, ca_cert.get(), ca_key.get()));
  LINKFIT_ASSIGN_OR_RETURN(pki->client_, MakePair("linkfit-test-client", "system:masters",
                                                  CertRole::kClient, ca_cert.get(), ca_key.get()));

  const std::pair<std::string, const std::string*> certs[] = {
      {pki->ca_cert_path(), &pki->ca_.cert},
      {pki->server_cert_path(), &pki->server_.cert},
      {pki->client_cert_path(), &pki->client_.cert}};
  for (const auto& [path, pem] : certs) {
    if (auto written = WriteFile(path, *pem, false); !written) {
      return tl::unexpected(written.error());
    }
  }
  const std::pair<std::string, const std::string*> keys[] = {
      {pki->server_key_path(), &pki->server_.key}, {pki->client_key_path(), &pki->client_.key}};
  for (const auto& [path, pem] : keys) {
    if (auto written = WriteFile(path, *pem, true); !written) {
      return tl::unexpected(written.error());
    }
  }
  // The CA key stays in memory only (IssueClientCertificate); it is never written out.
  return pki;
}

TestPki::~TestPki() {
  if (owns_dir_) {
    std::error_code ignored;
    std::filesystem::remove_all(dir_, ignored);
  }
}

Result<PemPair> TestPki::IssueClientCertificate(const std::string& common_name) const {
  X509Ptr ca_cert(nullptr, X509_free);
  LINKFIT_ASSIGN_OR_RETURN(ca_cert, CertFromPem(ca_.cert));
  PkeyPtr ca_key(nullptr, EVP_PKEY_free);
  LINKFIT_ASSIGN_OR_RETURN(ca_key, KeyFromPem(ca_.key));
  return MakePair(common_name, "", CertRole::kClient, ca_cert.get(), ca_key.get());
}

Result<PemPair> TestPki::UntrustedClientCertificate(const std::string& common_name) {
  return MakePair(common_name, "", CertRole::kClient, nullptr, nullptr);
}

}  // namespace linkfit::testing
