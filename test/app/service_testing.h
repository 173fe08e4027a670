#pragma once

// Helpers for the end-to-end Service tests: a standalone config on 127.0.0.1:0, a running
// Service, an httplib client for it, temporary directories and files.

#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>

#include <gtest/gtest.h>

#include "app/service.h"
#include "testing/fixtures.h"

namespace linkfit::app::testing {

namespace fs = std::filesystem;

inline Config StandaloneConfig(const std::string& cluster_file) {
  Config config;
  config.listen = "127.0.0.1:0";
  config.listen_host = "127.0.0.1";
  config.listen_port = 0;
  config.cluster_file = cluster_file;
  config.mig_profiles_dir = linkfit::testing::SourcePath("config/mig");
  config.limits.threads = 4;
  return config;
}

// A running Service and a client connected to it.
class Running {
 public:
  explicit Running(const Config& config) {
    auto started = Service::Start(config);
    EXPECT_TRUE(started.has_value()) << (started ? "" : started.error().message);
    if (!started) return;
    service_ = std::move(*started);
    client_ = std::make_unique<httplib::Client>("127.0.0.1", service_->port());
    client_->set_connection_timeout(5);
    client_->set_read_timeout(10);
  }
  bool ok() const { return service_ != nullptr; }
  Service& service() { return *service_; }
  httplib::Client& client() { return *client_; }

  // POSTs `body` to `path`; returns {status, body} ({-1, error} if there was no response).
  std::pair<int, std::string> Post(const std::string& path, const std::string& body) {
    auto result = client_->Post(path, body, "application/json");
    if (!result) return {-1, httplib::to_string(result.error())};
    return {result->status, result->body};
  }
  std::pair<int, std::string> Get(const std::string& path) {
    auto result = client_->Get(path);
    if (!result) return {-1, httplib::to_string(result.error())};
    return {result->status, result->body};
  }

 private:
  std::unique_ptr<Service> service_;
  std::unique_ptr<httplib::Client> client_;
};

// A fresh directory under the system temporary directory, removed on destruction.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string("linkfit-") + info->test_suite_name() + "-" + info->name();
    for (char& c : name) {
      if (c == '/') c = '_';
    }
    path_ = fs::temp_directory_path() / (name + "-" + std::to_string(::getpid()));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string Write(const std::string& name, const std::string& text) const {
    const fs::path file = path_ / name;
    std::ofstream out(file, std::ios::binary | std::ios::trunc);
    out << text;
    return file.string();
  }
  std::string Path(const std::string& name) const { return (path_ / name).string(); }

 private:
  fs::path path_;
};

// Returns the file's bytes ("" if it cannot be read).
inline std::string ReadFile(const std::string& path) {
  std::error_code error;
  const auto size = fs::file_size(path, error);
  if (error) return "";
  std::string text(static_cast<std::size_t>(size), '\0');
  std::ifstream in(path, std::ios::binary);
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  return text;
}

}  // namespace linkfit::app::testing
