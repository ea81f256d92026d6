// SIGINT (Ctrl-C), SIGTERM and SIGHUP (what timeout, systemd and docker send) ask a training run
// to stop and save; signals after the first only say that the save is still going on.
#pragma once

namespace pipeworks::cli {

// Installs the handlers for its lifetime (the previous ones come back after).
class stop_signals {
 public:
  // `later`: the line a signal after the first writes (null: training's, "the weights are being
  // saved"); it must live as long as the handlers.
  explicit stop_signals(const char* later = nullptr);
  ~stop_signals();
  stop_signals(const stop_signals&) = delete;
  stop_signals& operator=(const stop_signals&) = delete;

  // Whether a stop signal came, and which came first (0: none).
  static bool requested();
  static int first();
  // "Ctrl-C (SIGINT)", "SIGTERM", "SIGHUP".
  static const char* name(int sig);
};

}  // namespace pipeworks::cli
