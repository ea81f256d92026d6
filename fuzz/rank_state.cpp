// Fuzz target: the rank-state JSON of a rank's checkpoint file (its "pipeworks.rank_state"
// metadata) read by parse_rank_file, in a file that holds zeros for the tensors it may name.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "fuzz/rank_layout.hpp"
#include "runtime/checkpoint/rank_file.hpp"

namespace {

using pipeworks::shape_t;

// Every stage's weights under the names the reader looks for, and a few messages' tensors.
pipeworks::safetensors_file base_file(const pipeworks::fuzz::rank_layout& l) {
  nlohmann::json header = nlohmann::json::object();
  std::uint64_t end = 0;
  auto add = [&](const std::string& name, const shape_t& shape, const char* dtype, int size) {
    const std::uint64_t begin = end;
    end += static_cast<std::uint64_t>(pipeworks::numel(shape) * size);
    header[name] = {{"dtype", dtype}, {"shape", shape}, {"data_offsets", {begin, end}}};
  };
  for (std::size_t s = 0; s + 1 < l.boundaries.size(); ++s) {
    const auto params = l.m.make_params(l.boundaries[s], l.boundaries[s + 1]);
    for (const pipeworks::param_entry& e : params.entries()) {
      for (const char* p : {"", "pipeworks.grad/", "pipeworks.version.0/", "pipeworks.version.1/"})
        add(p + e.name, e.shape, "F32", 4);
      for (const char* p : {"pipeworks.optim.m/", "pipeworks.optim.v/"})
        add(p + e.name, {e.numel()}, "F32", 4);
    }
  }
  for (const char* name : {"pipeworks.held.0.0/input", "pipeworks.held.0.0/targets",
                           "pipeworks.send_f.0/data", "pipeworks.send_b.0/data",
                           "pipeworks.deliver.0/data", "pipeworks.deliver.0/targets"})
    add(name, {2, 3}, "F32", 4);
  add("pipeworks.losses", {2}, "F64", 8);
  const std::string text = header.dump();
  std::vector<std::byte> buffer(8 + text.size() + end);
  for (std::size_t i = 0; i < 8; ++i) buffer[i] = std::byte((text.size() >> (8 * i)) & 0xff);
  for (std::size_t i = 0; i < text.size(); ++i) buffer[8 + i] = std::byte(text[i]);
  auto file = pipeworks::parse_safetensors(std::move(buffer), "fuzz");
  if (!file) __builtin_trap();  // the base file itself is wrong: nothing could be tested
  return std::move(*file);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const pipeworks::fuzz::rank_layout l;
  static pipeworks::safetensors_file file = base_file(l);
  file.metadata["pipeworks.rank_state"].assign(reinterpret_cast<const char*>(data), size);
  (void)pipeworks::parse_rank_file(file, l.m, l.boundaries);
  return 0;
}
