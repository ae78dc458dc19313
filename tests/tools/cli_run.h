// Runs the build's shardpack binary (SHARDPACK_CLI, defined by tests/CMakeLists.txt) for the
// CLI's tests.
#ifndef SHARDPACK_TESTS_TOOLS_CLI_RUN_H_
#define SHARDPACK_TESTS_TOOLS_CLI_RUN_H_

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>

namespace shardpack::testing {

struct CliRun {
  int code;         // exit status; -1 when the CLI did not exit normally
  std::string out;  // stdout and stderr together
};

// Runs the CLI with `args` (in directory `cwd` when given, with the environment's
// `assignments`, "NAME=value ...", when given); a run still going after 60 s is killed and
// exits 124.
inline CliRun RunCli(const std::string& args, const std::string& cwd = "",
                     const std::string& assignments = "") {
  std::string cmd = (cwd.empty() ? "" : "cd '" + cwd + "' && ") +
                    (assignments.empty() ? "" : "env " + assignments + " ") + "timeout 60 " +
                    std::string(SHARDPACK_CLI) + " " + args + " 2>&1";
  FILE* p = ::popen(cmd.c_str(), "r");
  CliRun r{-1, ""};
  if (p == nullptr) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.out.append(buf.data(), n);
  int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return r;
}

}  // namespace shardpack::testing

#endif  // SHARDPACK_TESTS_TOOLS_CLI_RUN_H_
