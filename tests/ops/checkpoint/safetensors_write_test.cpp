// Tests for ops/checkpoint/safetensors_write: round trips through our reader, the exact byte
// layout, atomic replacement, and a read by an independent Python reader when python3 exists.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "ops/checkpoint/safetensors.hpp"
#include "tests/scratch_dir.hpp"

using namespace pipeworks;
namespace fs = std::filesystem;

namespace {
std::vector<char> slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}
}  // namespace

TEST_CASE("safetensors round trip keeps names, shapes, dtypes, bits and metadata",
          "[ops][checkpoint]") {
  const test::scratch_dir scratch;
  const fs::path& dir = scratch.path();
  const auto path = (dir / "model.safetensors").string();
  tensor w({2, 3}, dtype::f32);
  for (int i = 0; i < 6; ++i) w.data<float>()[i] = 0.1f * static_cast<float>(i) - 0.25f;
  w.data<float>()[5] = -0.0f;
  const std::vector<double> d = {1.0 / 3.0, -2.5};
  const std::vector<std::int32_t> n = {7};
  const std::vector<float> empty;
  const std::vector<safetensors_entry> entries = {
      entry_of("transformer.wte.weight", w), entry_of("opt.step", {1}, std::span(n)),
      entry_of("scale", {2}, std::span(d)), entry_of("nothing", {0, 4}, std::span(empty))};
  REQUIRE(save_safetensors(path, entries, {{"model", "gpt-tiny"}}).ok());

  auto f = read_safetensors(path);
  REQUIRE(f.ok());
  REQUIRE(f->metadata.at("model") == "gpt-tiny");
  REQUIRE(f->metadata.at("format") == "pt");
  REQUIRE(f->data_start % 8 == 0);  // header padded so the data is 8-byte aligned
  auto back = f->get("transformer.wte.weight");
  REQUIRE(back.ok());
  REQUIRE(back->shape() == shape_t{2, 3});
  REQUIRE(std::memcmp(back->bytes(), w.bytes(), w.nbytes()) == 0);
  REQUIRE(std::signbit(back->data<float>()[5]));
  REQUIRE(f->get("opt.step")->data<std::int32_t>()[0] == 7);
  REQUIRE(f->get("scale")->data<double>()[0] == 1.0 / 3.0);
  REQUIRE(f->get("nothing")->shape() == shape_t{0, 4});

  // Saving again replaces the file whole and leaves no temporary behind.
  REQUIRE(save_safetensors(path, std::span(entries).first(1)).ok());
  REQUIRE(read_safetensors(path)->tensors.size() == 1);
  int files = 0;
  for (const auto& e : fs::directory_iterator(dir)) files += e.is_regular_file() ? 1 : 0;
  REQUIRE(files == 1);
}

TEST_CASE("safetensors bytes follow the format exactly", "[ops][checkpoint]") {
  const test::scratch_dir scratch;
  const fs::path& dir = scratch.path();
  const auto path = dir / "x.safetensors";
  const std::vector<float> v = {1.0f, -2.0f};
  const std::vector<safetensors_entry> e = {entry_of("a", {2}, std::span(v))};
  REQUIRE(save_safetensors(path.string(), e, {{"format", "pt"}}).ok());
  const auto b = slurp(path);
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(b[static_cast<std::size_t>(i)]);
  const std::string header(b.begin() + 8, b.begin() + 8 + static_cast<std::ptrdiff_t>(n));
  REQUIRE(header.rfind(R"({"__metadata__":{"format":"pt"},"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]}})", 0) == 0);
  REQUIRE(b.size() == 8 + n + 8);
  // Little-endian IEEE 754: 1.0f = 00 00 80 3f, -2.0f = 00 00 00 c0.
  const unsigned char want[8] = {0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0};
  REQUIRE(std::memcmp(b.data() + 8 + n, want, 8) == 0);
}

TEST_CASE("save_safetensors rejects bad entries and unwritable paths", "[ops][checkpoint]") {
  const test::scratch_dir scratch;
  const fs::path& dir = scratch.path();
  const std::vector<float> v = {1.0f, 2.0f, 3.0f};
  const std::vector<safetensors_entry> wrong_size = {entry_of("w", {2, 2}, std::span(v))};
  REQUIRE_THAT(save_safetensors((dir / "a").string(), wrong_size).message(),
               Catch::Contains("tensor w") && Catch::Contains("[2, 2]"));
  const std::vector<safetensors_entry> twice = {entry_of("w", {3}, std::span(v)),
                                                entry_of("w", {3}, std::span(v))};
  REQUIRE_THAT(save_safetensors((dir / "a").string(), twice).message(),
               Catch::Contains("appears twice"));
  const std::vector<safetensors_entry> ok = {entry_of("w", {3}, std::span(v))};
  REQUIRE_THAT(save_safetensors((dir / "no" / "such" / "dir" / "a").string(), ok).message(),
               Catch::Contains("no/such/dir"));
  REQUIRE_FALSE(fs::exists(dir / "a"));
}

TEST_CASE("an independent Python reader reads our safetensors file", "[ops][checkpoint]") {
  if (!fs::exists("/usr/bin/python3")) {
    WARN("/usr/bin/python3 not found; skipping the cross-check");
    return;
  }
  const test::scratch_dir scratch;
  const fs::path& dir = scratch.path();
  const std::vector<float> a = {0.5f, -1.5f, 3.25f, 1e-20f, -7.0f, 0.0f};
  const std::vector<float> b = {42.0f};
  const std::vector<safetensors_entry> e = {entry_of("lm_head.weight", {3, 2}, std::span(a)),
                                            entry_of("transformer.ln_f.bias", {1}, std::span(b))};
  REQUIRE(save_safetensors((dir / "m.safetensors").string(), e).ok());
  // A reader written from the format description alone: json + struct, nothing of ours.
  std::ofstream(dir / "check.py") << R"PY(
import json, struct, sys
raw = open(sys.argv[1], 'rb').read()
(n,) = struct.unpack('<Q', raw[:8])
header = json.loads(raw[8:8 + n])
data = raw[8 + n:]
want = {'lm_head.weight': ([3, 2], [0.5, -1.5, 3.25, 1e-20, -7.0, 0.0]),
        'transformer.ln_f.bias': ([1], [42.0])}
assert header['__metadata__'] == {'format': 'pt'}, header
assert set(header) - {'__metadata__'} == set(want), header
for name, (shape, values) in want.items():
    t = header[name]
    assert t['dtype'] == 'F32' and t['shape'] == shape, t
    b, e = t['data_offsets']
    got = struct.unpack('<%df' % len(values), data[b:e])
    assert all(abs(x - y) <= 1e-6 * abs(y) for x, y in zip(got, values)), (name, got)
print('ok')
)PY";
  const std::string cmd = "/usr/bin/python3 " + (dir / "check.py").string() + " " +
                          (dir / "m.safetensors").string();
  REQUIRE(std::system(cmd.c_str()) == 0);
}
