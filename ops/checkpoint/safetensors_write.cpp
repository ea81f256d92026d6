// safetensors writing: header JSON, 8-byte alignment padding, then the tensors' bytes, written
// atomically (ops/checkpoint/atomic_file) with their size and sha256.
#include <array>
#include <bit>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "ops/checkpoint/safetensors.hpp"

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; this writer copies memory as it is");

namespace pipeworks {
namespace {

template <class T>
safetensors_entry make_entry(std::string name, shape_t shape, std::span<const T> data) {
  return {std::move(name), std::move(shape), dtype_of<T>(),
          reinterpret_cast<const std::byte*>(data.data()), data.size_bytes()};
}

result<std::string> build_header(std::span<const safetensors_entry> entries,
                                  const metadata_map& metadata) {
  nlohmann::json header = nlohmann::json::object();
  nlohmann::json meta = nlohmann::json::object();
  for (const auto& [k, v] : metadata) meta[k] = v;
  if (!meta.contains("format")) meta["format"] = "pt";
  header["__metadata__"] = meta;
  std::set<std::string> seen;
  std::uint64_t offset = 0;
  for (const auto& e : entries) {
    if (e.name.empty() || e.name == "__metadata__")
      return make_error("cannot save a tensor named '" + e.name + "'");
    if (!seen.insert(e.name).second)
      return make_error("cannot save checkpoint: tensor " + e.name + " appears twice");
    for (auto d : e.shape)
      if (d < 0)
        return make_error("cannot save tensor " + e.name + ": negative dimension in shape " +
                          shape_string(e.shape));
    const auto want = static_cast<std::size_t>(numel(e.shape)) * dtype_size(e.type);
    if (e.nbytes != want)
      return make_error("cannot save tensor " + e.name + ": shape " + shape_string(e.shape) +
                        " needs " + std::to_string(want) + " bytes of " +
                        std::string(dtype_name(e.type)) + " but " + std::to_string(e.nbytes) +
                        " were given");
    if (e.nbytes > 0 && e.data == nullptr)
      return make_error("cannot save tensor " + e.name + ": no data");
    header[e.name] = {{"dtype", dtype_name(e.type)},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + e.nbytes}}};
    offset += e.nbytes;
  }
  std::string text = header.dump();
  // The safetensors library pads the header with spaces so the data starts 8-byte aligned.
  text.append((8 - (8 + text.size()) % 8) % 8, ' ');
  return text;
}

}  // namespace

safetensors_entry entry_of(std::string name, const tensor& t) {
  return {std::move(name), t.shape(), t.type(), t.bytes(), t.nbytes()};
}
safetensors_entry entry_of(std::string name, shape_t shape, std::span<const float> data) {
  return make_entry(std::move(name), std::move(shape), data);
}
safetensors_entry entry_of(std::string name, shape_t shape, std::span<const double> data) {
  return make_entry(std::move(name), std::move(shape), data);
}
safetensors_entry entry_of(std::string name, shape_t shape, std::span<const std::int32_t> data) {
  return make_entry(std::move(name), std::move(shape), data);
}

result<written_file> write_safetensors(const std::string& path,
                                       std::span<const safetensors_entry> entries,
                                       const metadata_map& metadata) {
  auto header = build_header(entries, metadata);
  if (!header) return header.err();
  std::array<std::byte, 8> length;
  const std::uint64_t n = header->size();
  for (int i = 0; i < 8; ++i) length[static_cast<std::size_t>(i)] = static_cast<std::byte>(n >> (8 * i));
  // The length, the header, then each tensor's bytes where the caller keeps them: no copy.
  std::vector<std::span<const std::byte>> parts;
  parts.reserve(entries.size() + 2);
  parts.push_back(length);
  parts.push_back(std::as_bytes(std::span(header->data(), header->size())));
  for (const auto& e : entries) parts.emplace_back(e.data, e.nbytes);
  return write_file_atomic(path, parts);
}

status save_safetensors(const std::string& path, std::span<const safetensors_entry> entries,
                        const metadata_map& metadata) {
  auto written = write_safetensors(path, entries, metadata);
  if (!written) return written.err();
  return {};
}

}  // namespace pipeworks
