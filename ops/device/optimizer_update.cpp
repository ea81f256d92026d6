// optimizer_update: the CPU's optimizer_step on host spans, or the CUDA update kernels with the
// moments kept on the GPU or, offloaded, in page-locked host memory (see optimizer_update.hpp).
#include "ops/device/optimizer_update.hpp"

#include <algorithm>
#include <string>

#include "ops/device/device_memory.hpp"
#include "ops/device/device_ops.hpp"

namespace pipeworks {
namespace {

// A tensor of n elements beside `like` (same device and stream) holding `host`, or zeros when
// `host` is empty.
template <class T>
tensor upload(const tensor& like, const std::vector<T>& host, std::int64_t n,
              std::string_view name) {
  tensor t = like.zeros_beside({n}, dtype_of<T>());
  if (host.empty()) return t;
  if (static_cast<std::int64_t>(host.size()) != n)
    throw pipeworks_error("optimizer state of " + std::string(name) + " has " +
                          std::to_string(host.size()) + " elements, the weights " +
                          std::to_string(n));
  copy_bytes(t.bytes(), t.where(), host.data(), device::cpu(), t.nbytes(), t.stream());
  return t;
}

// The same in page-locked host memory, which the GPU's kernels reach over the bus.
template <class T>
tensor in_host(const std::vector<T>& host, std::int64_t n, std::string_view name) {
  const std::shared_ptr<caching_allocator> pool = pinned_host_pool();
  if (!pool)
    throw pipeworks_error("the optimizer state of " + std::string(name) + " cannot be offloaded: "
                          "this pipeworks was built without CUDA");
  tensor t({n}, dtype_of<T>());
  if (!host.empty()) {
    if (static_cast<std::int64_t>(host.size()) != n)
      throw pipeworks_error("optimizer state of " + std::string(name) + " has " +
                            std::to_string(host.size()) + " elements, the weights " +
                            std::to_string(n));
    std::copy(host.begin(), host.end(), t.data<T>());
  }
  return t.copy_to(device::cpu(), pool);
}

template <class T>
void download(const tensor& d, std::vector<T>& host) {
  const tensor h = d.copy_to(device::cpu());
  host.assign(h.span<T>().begin(), h.span<T>().end());
}

}  // namespace

template <class T>
status optimizer_update(const optimizer_config& c, double lr, const tensor& w, const tensor& g,
                        tensor& w_out, std::int64_t begin, std::int64_t n,
                        optimizer_state<T>& state, device_moments& on_device,
                        std::string_view name) {
  if (w.where().kind == device_kind::cpu) {
    const auto count = static_cast<std::size_t>(n);
    return optimizer_step<T>(c, lr, {w.data<T>() + begin, count}, {g.data<T>() + begin, count},
                             state, {w_out.data<T>() + begin, count}, name);
  }
  if (on_device.m.empty()) {  // the first update here, or moments restored from a checkpoint
    on_device.m = on_device.in_host ? in_host<T>(state.m, n, name) : upload<T>(w, state.m, n, name);
    on_device.v = on_device.in_host ? in_host<T>(state.v, n, name) : upload<T>(w, state.v, n, name);
  }
  gpu_optimizer_step(c, lr, w, g, w_out, begin, n, on_device.m, on_device.v, state.step + 1);
  on_device.updated_on = w_out.where();
  on_device.stream = w_out.stream();
  ++state.step;
  return {};
}

void settle_moments(const device_moments& on_device) {
  if (!on_device.m.empty() && on_device.m.where().kind == device_kind::cpu)  // written by the GPU
    wait_stream(on_device.updated_on, on_device.stream);
}

template <class T>
void read_moments(const device_moments& on_device, optimizer_kind kind, optimizer_state<T>& state) {
  if (on_device.m.empty()) return;
  settle_moments(on_device);
  download<T>(on_device.m, state.m);
  if (kind == optimizer_kind::adamw) download<T>(on_device.v, state.v);
}

#define PW_INSTANTIATE(T)                                                                     \
  template status optimizer_update<T>(const optimizer_config&, double, const tensor&,         \
                                      const tensor&, tensor&, std::int64_t, std::int64_t,     \
                                      optimizer_state<T>&, device_moments&, std::string_view); \
  template void read_moments<T>(const device_moments&, optimizer_kind, optimizer_state<T>&);
PW_INSTANTIATE(float)
PW_INSTANTIATE(double)
#undef PW_INSTANTIATE

}  // namespace pipeworks
