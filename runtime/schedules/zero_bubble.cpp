// Zero-bubble schedules ZB-H1 and ZB-H2 (Qi et al., 2023): backward split into I and W.
// Placeholder until the generators land; it reports that they are not available yet.
#include "runtime/schedule.hpp"

namespace pipeworks {

result<schedule> zero_bubble_h1(const schedule_params&) {
  return make_error("zb-h1: this schedule is not implemented yet");
}

result<schedule> zero_bubble_h2(const schedule_params&) {
  return make_error("zb-h2: this schedule is not implemented yet");
}

}  // namespace pipeworks
