// Tests for param_set checkpoints: bit-exact round trip, and clear errors for wrong shapes and
// missing tensors.
#include "ops/model/param_io.hpp"

#include <unistd.h>

#include <catch2/catch.hpp>
#include <filesystem>

#include "ops/model/gpt.hpp"

using namespace pipeworks;

namespace {
std::string temp_path(const char* name) {
  return (std::filesystem::temp_directory_path() /
          (std::string("pipeworks_") + std::to_string(getpid()) + "_" + name))
      .string();
}
}  // namespace

TEST_CASE("a saved param_set loads back bit-exactly", "[ops]") {
  model<float> m = make_gpt<float>(gpt_tiny());
  param_set p = m.init_params(4);
  const std::string path = temp_path("roundtrip.safetensors");
  REQUIRE(save_params(path, p).ok());
  param_set q = m.make_params();
  status s = load_params(path, q);
  INFO(s.message());
  REQUIRE(s.ok());
  REQUIRE(
      std::equal(p.values<float>().begin(), p.values<float>().end(), q.values<float>().begin()));
  auto file = read_safetensors(path);
  REQUIRE(file->find("transformer.h.1.attn.c_attn.weight")->shape == shape_t{64, 192});
  std::filesystem::remove(path);
}

TEST_CASE("loading a checkpoint of another shape names the tensor and both shapes", "[ops]") {
  const std::string path = temp_path("shape.safetensors");
  REQUIRE(save_params(path, make_gpt<float>(gpt_tiny()).init_params(1)).ok());
  param_set wider =
      make_gpt<float>({.context = 64, .layers = 2, .heads = 2, .width = 32}).make_params();
  status s = load_params(path, wider);
  REQUIRE_FALSE(s.ok());
  REQUIRE_THAT(s.message(), Catch::Contains("transformer.wte.weight") &&
                                Catch::Contains("[256, 64]") && Catch::Contains("[256, 32]"));
  param_set deeper =
      make_gpt<float>({.context = 64, .layers = 3, .heads = 2, .width = 64}).make_params();
  s = load_params(path, deeper);
  REQUIRE_FALSE(s.ok());
  REQUIRE_THAT(s.message(), Catch::Contains("transformer.h.2"));
  std::filesystem::remove(path);
}
