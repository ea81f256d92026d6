// The stop signals' handler: an atomic note of the first signal; a later one writes a line (with
// write(2), which a handler may call) and changes nothing, so the save in progress finishes.
#include "cli/stop_signals.hpp"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cstring>

namespace pipeworks::cli {
namespace {

constexpr int stop_set[] = {SIGINT, SIGTERM, SIGHUP};
std::atomic<int> first_signal{0};
struct sigaction previous[3];

const char train_line[] =
    "pipeworks train: stopping; the weights are being saved, and further signals are ignored "
    "until that is done (SIGKILL would lose what is not saved yet)\n";
std::atomic<const char*> later_line{train_line};

extern "C" void on_stop_signal(int sig) {
  int none = 0;
  if (first_signal.compare_exchange_strong(none, sig)) return;
  const char* line = later_line.load();
  (void)!::write(STDERR_FILENO, line, std::strlen(line));  // strlen and write: async-signal-safe
}

}  // namespace

stop_signals::stop_signals(const char* later) {
  later_line = later != nullptr ? later : train_line;
  struct sigaction sa = {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int i = 0; i < 3; ++i) ::sigaction(stop_set[i], &sa, &previous[i]);
}

stop_signals::~stop_signals() {
  for (int i = 0; i < 3; ++i) ::sigaction(stop_set[i], &previous[i], nullptr);
}

bool stop_signals::requested() { return first_signal.load() != 0; }
int stop_signals::first() { return first_signal.load(); }

const char* stop_signals::name(int sig) {
  switch (sig) {
    case SIGINT: return "Ctrl-C (SIGINT)";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
  }
  return "a signal";
}

}  // namespace pipeworks::cli
