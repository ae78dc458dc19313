#include "remote/http_fixtures.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <thread>

namespace shardpack::testing {

namespace {

sockaddr_in Loopback(int port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// A listening socket on an ephemeral loopback port.
int Listen(int* port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in a = Loopback(0);
  socklen_t len = sizeof a;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(fd, 64) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    ::close(fd);
    return -1;
  }
  *port = ntohs(a.sin_port);
  return fd;
}

int Connect(int port) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  sockaddr_in a = Loopback(port);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    ::close(fd);
    return -1;
  }
  return fd;
}

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

NginxServer::NginxServer(std::string root, std::string work_dir, const std::string& tls_cert,
                         const std::string& tls_key, const std::string& server_config)
    : root_(std::move(root)), work_dir_(std::move(work_dir)) {
  std::string tls;
  if (!tls_cert.empty()) {
    scheme_ = "https";
    tls = " ssl;\n    ssl_certificate " + tls_cert + ";\n    ssl_certificate_key " + tls_key;
  }
  // A free port: taken from the kernel, released, handed to nginx. Nothing else on this
  // machine races for ephemeral ports often enough to matter.
  int probe = Listen(&port_);
  if (probe < 0) {
    error_ = "no free port";
    return;
  }
  ::close(probe);
  const std::string conf = work_dir_ + "/nginx.conf";
  std::ofstream(conf) << "error_log " << work_dir_ << "/error.log warn;\n"
                      << "pid " << work_dir_ << "/nginx.pid;\n"
                      << "events { worker_connections 64; }\n"
                      << "http {\n"
                      << "  log_format sp '$request_method $uri $http_range $status "
                         "$body_bytes_sent';\n"
                      << "  access_log " << work_dir_ << "/access.log sp;\n"
                      << "  client_body_temp_path " << work_dir_ << "/body;\n"
                      << "  proxy_temp_path " << work_dir_ << "/proxy;\n"
                      << "  fastcgi_temp_path " << work_dir_ << "/fastcgi;\n"
                      << "  uwsgi_temp_path " << work_dir_ << "/uwsgi;\n"
                      << "  scgi_temp_path " << work_dir_ << "/scgi;\n"
                      << "  default_type application/octet-stream;\n"
                      << "  server {\n"
                      << "    listen 127.0.0.1:" << port_ << tls << ";\n"
                      << "    root " << root_ << ";\n"
                      << server_config << "  }\n"
                      << "}\n";
  pid_ = ::fork();
  if (pid_ == 0) {
    const int null = ::open("/dev/null", O_WRONLY);
    ::dup2(null, 1);
    ::dup2(null, 2);
    ::execl(kNginx, kNginx, "-c", conf.c_str(), "-p", work_dir_.c_str(), "-g",
            "daemon off; master_process off;", static_cast<char*>(nullptr));
    ::_exit(127);
  }
  // Ready when it accepts a connection; a bounded wait, not a sleep for synchronisation.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < deadline) {
    int status;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      error_ = "nginx exited at start: " + Slurp(work_dir_ + "/error.log");
      return;
    }
    int fd = Connect(port_);
    if (fd >= 0) {
      ::close(fd);
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  error_ = "nginx did not listen within 10 s: " + Slurp(work_dir_ + "/error.log");
}

NginxServer::~NginxServer() {
  if (pid_ > 0) {
    ::kill(pid_, SIGTERM);
    int status;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
  }
}

std::string NginxServer::Url(const std::string& path) const {
  return scheme_ + "://127.0.0.1:" + std::to_string(port_) + "/" + path;
}

std::string MakeSelfSignedCertificate(const std::string& dir) {
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 2 -subj /CN=127.0.0.1 "
      "-addext subjectAltName=IP:127.0.0.1 -keyout " +
      dir + "/key.pem -out " + dir + "/cert.pem > " + dir + "/openssl.log 2>&1";
  const int status = std::system(command.c_str());
  if (status != 0)
    return "openssl req failed (" + std::to_string(status) + "): " + Slurp(dir + "/openssl.log");
  return "";
}

// nginx writes a request's log line after sending the response, so a client that has its
// answer can read the log before the line is there. The one nginx process handles events
// in turn: once it has answered a later request, every earlier line is written. The
// barrier's own line is left out of AccessLog().
constexpr char kLogBarrier[] = "/.shardpack-log-barrier";

void NginxServer::AwaitLog() const {
  const int fd = Connect(port_);
  if (fd < 0) return;
  const std::string request = std::string("GET ") + kLogBarrier + " HTTP/1.0\r\n\r\n";
  if (::write(fd, request.data(), request.size()) == static_cast<ssize_t>(request.size())) {
    char buffer[4096];
    while (::read(fd, buffer, sizeof buffer) > 0) {
    }
  }
  ::close(fd);
}

std::vector<std::string> NginxServer::AccessLog() const {
  AwaitLog();
  std::vector<std::string> lines;
  std::istringstream in(Slurp(work_dir_ + "/access.log"));
  const std::string barrier = std::string(" ") + kLogBarrier + " ";
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line.find(barrier) == std::string::npos) lines.push_back(line);
  }
  return lines;
}

size_t NginxServer::CountRequests(const std::string& suffix) const {
  size_t n = 0;
  for (const std::string& line : AccessLog()) {
    std::istringstream fields(line);
    std::string method, uri;
    fields >> method >> uri;
    if (uri.size() >= suffix.size() &&
        uri.compare(uri.size() - suffix.size(), suffix.size(), suffix) == 0) {
      ++n;
    }
  }
  return n;
}

DroppingProxy::DroppingProxy(int upstream_port, int drop_connections, uint64_t drop_after_bytes)
    : upstream_port_(upstream_port),
      drop_connections_(drop_connections),
      drop_after_bytes_(drop_after_bytes) {
  listen_fd_ = Listen(&port_);
  if (listen_fd_ < 0 || ::pipe2(wake_, O_CLOEXEC) != 0) return;
  thread_ = std::thread([this] { Run(); });
}

DroppingProxy::~DroppingProxy() {
  if (thread_.joinable()) {
    char c = 0;
    (void)!::write(wake_[1], &c, 1);
    thread_.join();
  }
  for (int fd : {listen_fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

std::string DroppingProxy::Url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/" + path;
}

// One thread, poll(2) over every connection: curl may open a new connection while it
// keeps an old one alive, so connections are served side by side.
void DroppingProxy::Run() {
  struct Pair {
    int client;
    int server;
    uint64_t limit;  // response bytes to relay before cutting; UINT64_MAX: no cut
    uint64_t relayed = 0;
  };
  std::vector<Pair> pairs;
  auto close_pair = [](Pair& p) {
    ::close(p.client);
    ::close(p.server);
    p.client = p.server = -1;
  };
  for (;;) {
    std::vector<pollfd> fds{{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    for (const Pair& p : pairs) {
      fds.push_back({p.client, POLLIN, 0});
      fds.push_back({p.server, POLLIN, 0});
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (fds[0].revents != 0) break;
    if (fds[1].revents & POLLIN) {
      int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (client >= 0) {
        int server = Connect(upstream_port_);
        const int n = connections_++;
        const bool drop = drop_connections_ < 0 || n < drop_connections_;
        if (server < 0) {
          ::close(client);
        } else {
          pairs.push_back({client, server, drop ? drop_after_bytes_ : UINT64_MAX});
        }
      }
    }
    // Only the pairs polled this round: one accepted above waits for the next.
    const size_t polled = (fds.size() - 2) / 2;
    for (size_t i = 0; i < polled; ++i) {
      Pair& p = pairs[i];
      const short from_client = fds[2 + 2 * i].revents;
      const short from_server = fds[3 + 2 * i].revents;
      char buf[16384];
      if (from_client != 0) {
        ssize_t r = ::read(p.client, buf, sizeof buf);
        if (r <= 0 || ::send(p.server, buf, static_cast<size_t>(r), MSG_NOSIGNAL) != r) {
          close_pair(p);
          continue;
        }
      }
      if (from_server != 0) {
        ssize_t r = ::read(p.server, buf, sizeof buf);
        if (r <= 0) {
          close_pair(p);
          continue;
        }
        uint64_t n = static_cast<uint64_t>(r);
        const bool cut = n >= p.limit - p.relayed;
        if (cut) n = p.limit - p.relayed;
        if (n > 0 && ::send(p.client, buf, n, MSG_NOSIGNAL) != static_cast<ssize_t>(n)) {
          close_pair(p);
          continue;
        }
        p.relayed += n;
        if (cut) {
          ++dropped_;
          close_pair(p);
        }
      }
    }
    std::erase_if(pairs, [](const Pair& p) { return p.client < 0; });
  }
  for (Pair& p : pairs) close_pair(p);
}

TricklingServer::TricklingServer(uint64_t body_bytes, size_t chunk_bytes, int interval_ms)
    : body_bytes_(body_bytes), chunk_bytes_(chunk_bytes), interval_ms_(interval_ms) {
  listen_fd_ = Listen(&port_);
  if (listen_fd_ < 0 || ::pipe2(wake_, O_CLOEXEC) != 0) return;
  thread_ = std::thread([this] { Run(); });
}

TricklingServer::~TricklingServer() {
  if (thread_.joinable()) {
    char c = 0;
    (void)!::write(wake_[1], &c, 1);
    thread_.join();
  }
  for (int fd : {listen_fd_, wake_[0], wake_[1]}) {
    if (fd >= 0) ::close(fd);
  }
}

std::string TricklingServer::Url(const std::string& path) const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/" + path;
}

bool TricklingServer::Wait(int ms) const {
  pollfd wake{wake_[0], POLLIN, 0};
  return ::poll(&wake, 1, ms) == 0;
}

void TricklingServer::Run() {
  const std::string chunk(chunk_bytes_, 'x');
  for (;;) {
    pollfd fds[2] = {{wake_[0], POLLIN, 0}, {listen_fd_, POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return;
    }
    if (fds[0].revents != 0) return;
    const int client = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    // The request's headers, up to the blank line; what they ask for does not matter.
    std::string request;
    char buf[4096];
    while (request.find("\r\n\r\n") == std::string::npos) {
      pollfd in[2] = {{wake_[0], POLLIN, 0}, {client, POLLIN, 0}};
      if (::poll(in, 2, -1) < 0 || in[0].revents != 0) break;
      const ssize_t r = ::read(client, buf, sizeof buf);
      if (r <= 0) break;
      request.append(buf, static_cast<size_t>(r));
    }
    bool alive = request.find("\r\n\r\n") != std::string::npos;
    if (alive) {
      ++requests_;
      const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(body_bytes_) +
                               "\r\nContent-Type: application/octet-stream\r\n\r\n";
      alive = ::send(client, head.data(), head.size(), MSG_NOSIGNAL) ==
              static_cast<ssize_t>(head.size());
    }
    for (uint64_t left = body_bytes_; alive && left > 0;) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(left, chunk.size()));
      alive = ::send(client, chunk.data(), n, MSG_NOSIGNAL) == static_cast<ssize_t>(n);
      if (alive) {
        sent_ += n;
        left -= n;
        alive = Wait(interval_ms_);
      }
    }
    ::close(client);
    if (!Wait(0)) return;
  }
}

}  // namespace shardpack::testing
