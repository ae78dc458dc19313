// Fixtures for the remote-dataset tests: a real nginx (Debian's nginx-light) serving a
// directory on 127.0.0.1, its access log read back to count requests, and a TCP proxy
// that cuts connections after a number of bytes, as a server dropping mid-transfer does.
#ifndef SHARDPACK_TESTS_REMOTE_HTTP_FIXTURES_H_
#define SHARDPACK_TESTS_REMOTE_HTTP_FIXTURES_H_

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace shardpack::testing {

inline constexpr char kNginx[] = "/usr/sbin/nginx";

// nginx in the foreground (daemon off, master_process off) on an ephemeral port, serving
// `root`; all its files (config, logs, pid, temp paths) in `work_dir`. Stopped on
// destruction. With a certificate and its key (PEM files), it serves HTTPS; `server_config`
// goes into the server block as it is (e.g. a check of a request header).
class NginxServer {
 public:
  NginxServer(std::string root, std::string work_dir, const std::string& tls_cert = "",
              const std::string& tls_key = "", const std::string& server_config = "");
  ~NginxServer();
  NginxServer(const NginxServer&) = delete;
  NginxServer& operator=(const NginxServer&) = delete;

  // Empty when it started; otherwise why not (with nginx's error log).
  const std::string& error() const { return error_; }
  int port() const { return port_; }
  std::string Url(const std::string& path) const;  // http(s)://127.0.0.1:PORT/<path>

  // One per request served: "METHOD URI RANGE STATUS BODY_BYTES" (RANGE "-" when none).
  std::vector<std::string> AccessLog() const;
  // Requests whose URI ends with `suffix`.
  size_t CountRequests(const std::string& suffix) const;

 private:
  // Returns once every request answered so far is in the access log.
  void AwaitLog() const;

  std::string root_, work_dir_, error_;
  std::string scheme_ = "http";
  int port_ = 0;
  pid_t pid_ = -1;
};

// Writes a self-signed certificate for 127.0.0.1 (as an IP subjectAltName) and its key
// into `dir` as cert.pem and key.pem, with the openssl command; "" when done, else why not.
std::string MakeSelfSignedCertificate(const std::string& dir);

// Listens on 127.0.0.1 and relays each connection to 127.0.0.1:`upstream_port`. The first
// `drop_connections` connections (all of them when negative) are closed once
// `drop_after_bytes` bytes of the response (headers included) have been relayed.
class DroppingProxy {
 public:
  DroppingProxy(int upstream_port, int drop_connections, uint64_t drop_after_bytes);
  ~DroppingProxy();
  DroppingProxy(const DroppingProxy&) = delete;
  DroppingProxy& operator=(const DroppingProxy&) = delete;

  int port() const { return port_; }
  std::string Url(const std::string& path) const;
  int connections() const { return connections_.load(); }
  int dropped() const { return dropped_.load(); }

 private:
  void Run();

  int upstream_port_;
  int drop_connections_;
  uint64_t drop_after_bytes_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::atomic<int> connections_{0};
  std::atomic<int> dropped_{0};
  std::thread thread_;
};

// A server that is never stalled and never done: it answers every request "200 OK" with a
// Content-Length of `body_bytes`, then sends the body ('x's) `chunk_bytes` at a time, one
// chunk every `interval_ms`, faster than a stall limit (1 KiB/s) notices for chunks of
// 1 KiB and more each second. One connection at a time; stopped on destruction.
class TricklingServer {
 public:
  TricklingServer(uint64_t body_bytes, size_t chunk_bytes, int interval_ms);
  ~TricklingServer();
  TricklingServer(const TricklingServer&) = delete;
  TricklingServer& operator=(const TricklingServer&) = delete;

  int port() const { return port_; }
  std::string Url(const std::string& path) const;  // http://127.0.0.1:PORT/<path>
  int requests() const { return requests_.load(); }
  uint64_t sent() const { return sent_.load(); }  // body bytes, all requests together

 private:
  void Run();
  // Waits `ms`; false when the server is being stopped.
  bool Wait(int ms) const;

  uint64_t body_bytes_;
  size_t chunk_bytes_;
  int interval_ms_;
  int listen_fd_ = -1;
  int wake_[2] = {-1, -1};
  int port_ = 0;
  std::atomic<int> requests_{0};
  std::atomic<uint64_t> sent_{0};
  std::thread thread_;
};

}  // namespace shardpack::testing

#endif  // SHARDPACK_TESTS_REMOTE_HTTP_FIXTURES_H_
