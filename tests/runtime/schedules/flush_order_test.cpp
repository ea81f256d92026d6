// Every flush schedule adds a step's microbatch gradients on each stage in microbatch order (its
// B or W actions come oldest first), the order --schedule none adds them in: what makes a flush
// schedule end with none's weights bit for bit, since a sum in another order rounds otherwise.
#include <catch2/catch.hpp>
#include <map>
#include <string>

#include "runtime/schedule.hpp"

using namespace pipeworks;

namespace {

// Checks each virtual stage's B and W microbatches, in program order, rise within each step.
void check_oldest_first(const schedule& s, int m, const std::string& name) {
  for (std::size_t r = 0; r < s.programs.size(); ++r) {
    std::map<int, int> last;  // virtual stage -> the last microbatch whose gradient it added
    for (const action& a : s.programs[r]) {
      if (a.kind != action_kind::backward && a.kind != action_kind::weight_grad) continue;
      auto [at, first] = last.try_emplace(a.stage, a.microbatch);
      if (!first) {
        const bool same_step = at->second / m == a.microbatch / m;
        INFO(name << ", rank " << r << ", virtual stage " << a.stage << ": microbatch "
                  << a.microbatch << " after " << at->second);
        if (same_step) CHECK(a.microbatch > at->second);
        at->second = a.microbatch;
      }
    }
  }
}

}  // namespace

TEST_CASE("every flush schedule adds each stage's gradients oldest microbatch first", "[runtime]") {
  int checked = 0;
  for (schedule_kind k : every_schedule_kind()) {
    if (!is_flush(k)) continue;
    const bool looped = k == schedule_kind::interleaved || k == schedule_kind::bfs;
    for (int p = 2; p <= 6; ++p)
      for (int m = 1; m <= 3 * p + 2; ++m)
        for (int w : {1, 2})
          for (int v : looped ? std::vector<int>{2, 3} : std::vector<int>{default_chunks(k)}) {
            auto made = make_schedule(k, schedule_params{p, m, v, w, 2});
            if (!made) continue;  // parameters the generator refuses
            // A route numbers its own microbatches: dualpipe's per-route count is m.
            check_oldest_first(*made, made->params.microbatches,
                               std::string(schedule_name(k)) + " p=" + std::to_string(p) +
                                   " m=" + std::to_string(m) + " w=" + std::to_string(w) +
                                   " v=" + std::to_string(v));
            ++checked;
          }
  }
  CHECK(checked > 500);
}
