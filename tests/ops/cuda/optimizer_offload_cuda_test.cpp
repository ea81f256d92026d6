// Optimizer offload on a GPU (ops/device/optimizer_update with device_moments::in_host): the
// moments live in page-locked host memory and the GPU's kernel updates them there, giving the
// weights and moments of the update with the moments on the GPU bit for bit, AdamW and SGD.
// Needs a GPU: skips, saying so, where there is none or no CUDA build.
#include <catch2/catch.hpp>

#include <cstring>
#include <vector>

#include "gpu_test_util.hpp"
#include "ops/device/device_context.hpp"
#include "ops/device/optimizer_update.hpp"

using namespace pipeworks;
using namespace pipeworks::cuda_test;

namespace {

std::vector<float> host_values(const device_context& gpu, const tensor& t) {
  const tensor h = gpu.to_host(t);
  return {h.data<float>(), h.data<float>() + h.numel()};
}

tensor on_gpu(const device_context& gpu, const std::vector<float>& v) {
  tensor h({static_cast<std::int64_t>(v.size())}, dtype::f32);
  std::memcpy(h.data<float>(), v.data(), v.size() * sizeof(float));
  return gpu.adopt(std::move(h));
}

}  // namespace

TEST_CASE("offloaded optimizer moments give the on-GPU update's bits", "[cuda]") {
  if (!have_gpu()) return;
  const device_context gpu = device_context::cuda(0);
  const std::int64_t n = 100003, begin = 17, count = 90001;  // a slice, not a block multiple
  for (optimizer_kind kind : {optimizer_kind::adamw, optimizer_kind::sgd}) {
    INFO(optimizer_kind_name(kind));
    optimizer_config c = default_optimizer_config(kind);
    c.weight_decay = 0.05;
    tensor w_dev = on_gpu(gpu, random_floats(static_cast<std::size_t>(n), 3));
    tensor w_off = on_gpu(gpu, random_floats(static_cast<std::size_t>(n), 3));
    tensor out_dev = gpu.zeros({n}, dtype::f32), out_off = gpu.zeros({n}, dtype::f32);
    optimizer_state<float> s_dev, s_off;
    device_moments m_dev, m_off;
    m_off.in_host = true;
    for (int step = 0; step < 4; ++step) {
      const tensor g = on_gpu(gpu, random_floats(static_cast<std::size_t>(n), 10 + step));
      REQUIRE(optimizer_update<float>(c, 1e-2, w_dev, g, out_dev, begin, count, s_dev, m_dev, "w").ok());
      REQUIRE(optimizer_update<float>(c, 1e-2, w_off, g, out_off, begin, count, s_off, m_off, "w").ok());
      std::swap(w_dev, out_dev);
      std::swap(w_off, out_off);
    }
    CHECK(m_dev.m.where().kind == device_kind::cuda);
    CHECK(m_off.m.where().kind == device_kind::cpu);  // in page-locked host memory
    const std::vector<float> a = host_values(gpu, w_dev), b = host_values(gpu, w_off);
    CHECK(std::memcmp(a.data() + begin, b.data() + begin, count * sizeof(float)) == 0);
    read_moments<float>(m_dev, kind, s_dev);
    read_moments<float>(m_off, kind, s_off);
    CHECK(s_dev.step == 4);
    CHECK(s_off.step == 4);
    REQUIRE(s_dev.m.size() == static_cast<std::size_t>(count));
    CHECK(s_dev.m == s_off.m);
    CHECK(s_dev.v == s_off.v);
  }
}

TEST_CASE("offloaded moments restored from host vectors go on from them", "[cuda]") {
  if (!have_gpu()) return;
  const device_context gpu = device_context::cuda(0);
  const std::int64_t n = 5000;
  const optimizer_config c = default_optimizer_config(optimizer_kind::adamw);
  optimizer_state<float> s_dev, s_off;
  s_dev.m = random_floats(n, 5, 0.01f);
  s_dev.v = random_floats(n, 6, 0.01f);
  for (float& x : s_dev.v) x = x * x;
  s_dev.step = 7;
  s_off = s_dev;
  device_moments m_dev, m_off;
  m_off.in_host = true;
  const tensor w = on_gpu(gpu, random_floats(n, 8)), g = on_gpu(gpu, random_floats(n, 9));
  tensor out_dev = gpu.zeros({n}, dtype::f32), out_off = gpu.zeros({n}, dtype::f32);
  REQUIRE(optimizer_update<float>(c, 1e-3, w, g, out_dev, 0, n, s_dev, m_dev, "w").ok());
  REQUIRE(optimizer_update<float>(c, 1e-3, w, g, out_off, 0, n, s_off, m_off, "w").ok());
  CHECK(host_values(gpu, out_dev) == host_values(gpu, out_off));
  read_moments<float>(m_dev, c.kind, s_dev);
  read_moments<float>(m_off, c.kind, s_off);
  CHECK(s_dev.m == s_off.m);
  CHECK(s_dev.v == s_off.v);
}
