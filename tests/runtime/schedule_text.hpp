// Test helper: schedules from hand-written program text, one row per rank ("0F0 0SEND_F0 ..."),
// and the validator's verdict on one as a string ("ok" or the error).
#pragma once
#include <string>
#include <vector>

#include "runtime/schedule.hpp"
#include "runtime/validate.hpp"

namespace pipeworks::test {

inline schedule from_text(const std::vector<std::string>& rows, int devices, int chunks = 1,
                          int replicas = 1, bool lowered = true) {
  std::vector<program> programs;
  for (const auto& row : rows) programs.push_back(parse_program(row).value());
  return schedule_from_programs(std::move(programs), devices, chunks, replicas, lowered).value();
}

inline std::string problem(const schedule& s) {
  const status st = validate(s);
  return st.ok() ? std::string("ok") : st.message();
}

}  // namespace pipeworks::test
