#include "read/mapped_read_guard.h"

#include <signal.h>

#include <cstring>
#include <mutex>

namespace shardpack::read {
namespace {

constexpr const char* kSigbusMessage =
    "the file is shorter than when it was opened: reading its mapping raised SIGBUS (was the "
    "dataset modified while in use?)";

struct sigaction g_previous;

void OnSigbus(int sig, siginfo_t* info, void* context) {
  sigjmp_buf* guard = internal::CurrentGuard();
  if (guard != nullptr) siglongjmp(*guard, 1);
  // Not ours: the handler that was there before, or the default action (the faulting
  // instruction runs again and the signal kills the process as it would have).
  if ((g_previous.sa_flags & SA_SIGINFO) != 0 && g_previous.sa_sigaction != nullptr) {
    g_previous.sa_sigaction(sig, info, context);
    return;
  }
  if (g_previous.sa_handler != SIG_DFL && g_previous.sa_handler != SIG_IGN &&
      g_previous.sa_handler != nullptr) {
    g_previous.sa_handler(sig);
    return;
  }
  sigaction(SIGBUS, &g_previous, nullptr);
}

}  // namespace

namespace internal {

sigjmp_buf*& CurrentGuard() {
  static thread_local sigjmp_buf* guard = nullptr;
  return guard;
}

void InstallSigbusHandler() {
  static std::once_flag once;
  std::call_once(once, [] {
    // Touch this thread's guard slot first, so that the handler never makes the first
    // access to it (which could allocate thread-local storage).
    (void)CurrentGuard();
    struct sigaction action;
    std::memset(&action, 0, sizeof(action));
    action.sa_sigaction = OnSigbus;
    action.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&action.sa_mask);
    sigaction(SIGBUS, &action, &g_previous);
  });
}

Status SigbusFault() { return IOError(kSigbusMessage); }

}  // namespace internal

bool IsMappedReadFault(const Status& s) {
  return s.code() == StatusCode::kIOError && s.message().find("raised SIGBUS") != std::string::npos;
}

}  // namespace shardpack::read
