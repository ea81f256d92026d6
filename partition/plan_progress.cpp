// The calling thread's progress sink for the planners; see plan_progress.hpp.
#include "partition/plan_progress.hpp"

#include <utility>

namespace pipeworks {

namespace {
thread_local plan_progress_scope* current = nullptr;
thread_local std::function<void(const plan_progress&)>* current_sink = nullptr;
thread_local long long searches = 0;
}  // namespace

plan_progress_scope::plan_progress_scope(std::function<void(const plan_progress&)> sink)
    : sink_(std::move(sink)), outer_(current), outer_searches_(searches) {
  current = this;
  current_sink = &sink_;
  searches = 0;
}

plan_progress_scope::~plan_progress_scope() {
  searches = outer_searches_;
  current = outer_;
  current_sink = outer_ != nullptr ? &outer_->sink_ : nullptr;
}

long long next_plan_search() { return ++searches; }

void report_plan_progress(const std::string& what, long long done, long long total) {
  if (current_sink == nullptr || !*current_sink) return;
  (*current_sink)(plan_progress{what, done, total});
}

}  // namespace pipeworks
