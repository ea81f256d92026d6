// The optimizer's update of one tensor on the device its weights live on: the seam STEP goes
// through, so that nothing above it branches on the device.
#pragma once
#include <cstdint>
#include <string_view>

#include "base/result.hpp"
#include "ops/optim/optimizer.hpp"
#include "ops/tensor.hpp"

namespace pipeworks {

// A GPU's copy of one tensor's moments (m; v for AdamW), made on the first update there; empty
// on the CPU, whose moments are the host vectors of optimizer_state.
struct device_moments {
  tensor m, v;
  // Offload (the plan's runtime.offload optimizer): m and v are made in page-locked host memory
  // instead of the GPU's, and the GPU's update kernel reads and writes them there, over the bus
  // (a page-locked buffer is the same address on the GPU under unified addressing). The same
  // kernel on the same values: the same bits as moments on the GPU. Set before the first update.
  bool in_host = false;
  // The GPU and stream the last update was queued on: host moments are read after it is done.
  device updated_on = device::cpu();
  void* stream = nullptr;
};

// One update of elements [begin, begin + n) of the arenas w and g into w_out, on their device,
// at rate lr: on the CPU with `state`'s moments (optimizer_step: sized on first use, sizes
// checked naming `name`); on a GPU (f32 only) with `on_device`, uploaded from `state` when
// empty (into the GPU's memory, or page-locked host memory when on_device.in_host). state.step
// counts the update on either.
template <class T>
status optimizer_update(const optimizer_config& c, double lr, const tensor& w, const tensor& g,
                        tensor& w_out, std::int64_t begin, std::int64_t n,
                        optimizer_state<T>& state, device_moments& on_device,
                        std::string_view name);

// Returns once the GPU's last update of offloaded (host) moments is done; nothing otherwise. Before
// they are read on the host or freed: the pool would give their memory out again.
void settle_moments(const device_moments& on_device);

// state's moments brought up to date from a GPU's copy (nothing when there is none; host moments
// once the GPU's last update of them is done).
template <class T>
void read_moments(const device_moments& on_device, optimizer_kind kind, optimizer_state<T>& state);

}  // namespace pipeworks
