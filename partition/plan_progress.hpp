// Progress of a long plan, for a status line: the caller installs a sink for its thread
// (plan_progress_scope) and the planners report each probe of their searches to it.
#pragma once
#include <functional>
#include <string>

namespace pipeworks {

// What a planner has done so far: `done` probes of the current search out of about `total` (0
// when unknown), and what the search is, e.g. "bottleneck search" or "2BW candidates".
struct plan_progress {
  std::string what;
  long long done = 0;
  long long total = 0;
};

// Installs `sink` for the calling thread while the scope lives; scopes nest.
class plan_progress_scope {
 public:
  explicit plan_progress_scope(std::function<void(const plan_progress&)> sink);
  ~plan_progress_scope();
  plan_progress_scope(const plan_progress_scope&) = delete;
  plan_progress_scope& operator=(const plan_progress_scope&) = delete;

 private:
  std::function<void(const plan_progress&)> sink_;
  plan_progress_scope* outer_;
  long long outer_searches_;
};

// Tells the calling thread's sink, if any. Cheap without one.
void report_plan_progress(const std::string& what, long long done, long long total);

// Numbers the searches of one plan (1, 2, ...; PipeDream's planner refines its plan over a few
// rounds), counted from the innermost scope's start.
long long next_plan_search();

}  // namespace pipeworks
