// safetensors reading: the header parsed and every tensor's dtype, shape and byte range checked
// before any data is trusted; then loading into caller storage against expected shapes.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

#include <nlohmann/json.hpp>

#include "ops/checkpoint/safetensors.hpp"
#include "base/input_file.hpp"
#include "base/json_read.hpp"

namespace pipeworks {
namespace {

using json = nlohmann::json;

result<dtype> parse_dtype(const std::string& s, const std::string& where) {
  if (s == "F32") return dtype::f32;
  if (s == "F64") return dtype::f64;
  if (s == "I32") return dtype::i32;
  return make_error(where + " has dtype " + s +
                    ", which pipeworks cannot read (it reads F32, F64 and I32)");
}

bool as_u64(const json& j, std::uint64_t& out) {
  if (j.is_number_unsigned()) {
    out = j.get<std::uint64_t>();
    return true;
  }
  if (j.is_number_integer() && j.get<std::int64_t>() >= 0) {
    out = static_cast<std::uint64_t>(j.get<std::int64_t>());
    return true;
  }
  return false;
}

result<safetensors_info> parse_entry(const std::string& name, const json& e,
                                     const std::string& where) {
  if (!e.is_object() || !e.contains("dtype") || !e.contains("shape") ||
      !e.contains("data_offsets"))
    return make_error(where + " needs an object with dtype, shape and data_offsets");
  if (!e["dtype"].is_string()) return make_error(where + ": dtype is not a string");
  auto dt = parse_dtype(e["dtype"].get<std::string>(), where);
  if (!dt) return dt.err();
  safetensors_info info{name, *dt, {}, 0, 0};
  if (!e["shape"].is_array()) return make_error(where + ": shape is not an array");
  std::uint64_t count = 1;
  for (const auto& d : e["shape"]) {
    std::uint64_t v = 0;
    if (!as_u64(d, v)) return make_error(where + ": shape holds " + d.dump() +
                                         ", not a non-negative integer");
    if (v != 0 && count > std::numeric_limits<std::uint64_t>::max() / 8 / v)
      return make_error(where + ": shape " + e["shape"].dump() + " is too large");
    count *= v;
    info.shape.push_back(static_cast<std::int64_t>(v));
  }
  const auto& off = e["data_offsets"];
  if (!off.is_array() || off.size() != 2 || !as_u64(off[0], info.begin) ||
      !as_u64(off[1], info.end) || info.end < info.begin)
    return make_error(where + ": data_offsets " + off.dump() +
                      " is not a pair [begin, end] with begin <= end");
  const std::uint64_t want = count * dtype_size(info.type);
  if (info.end - info.begin != want)
    return make_error(where + ": data_offsets " + off.dump() + " span " +
                      std::to_string(info.end - info.begin) + " bytes, but " +
                      std::string(dtype_name(info.type)) + " shape " + shape_string(info.shape) +
                      " needs " + std::to_string(want));
  return info;
}

template <class T, class S>
void convert(std::span<T> dst, const std::byte* src) {
  for (std::size_t i = 0; i < dst.size(); ++i) {
    S v;
    std::memcpy(&v, src + i * sizeof(S), sizeof(S));
    dst[i] = static_cast<T>(v);
  }
}

}  // namespace

const safetensors_info* safetensors_file::find(const std::string& name) const {
  for (const auto& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

std::span<const std::byte> safetensors_file::bytes_of(const safetensors_info& info) const {
  return {buffer.data() + data_start + info.begin, static_cast<std::size_t>(info.end - info.begin)};
}

result<tensor> safetensors_file::get(const std::string& name) const {
  const auto* info = find(name);
  if (!info) return make_error("checkpoint " + source + " has no tensor " + name);
  tensor t(info->shape, info->type);
  const auto b = bytes_of(*info);
  if (!b.empty()) std::memcpy(t.bytes(), b.data(), b.size());
  return t;
}

result<safetensors_file> parse_safetensors(std::vector<std::byte> buffer, std::string source) {
  const std::string file = "checkpoint " + source;
  const std::uint64_t size = buffer.size();
  if (size < 8)
    return make_error(file + " is truncated: " + std::to_string(size) +
                      " bytes, too short for the 8-byte header length");
  std::uint64_t hlen = 0;
  for (int i = 7; i >= 0; --i) hlen = (hlen << 8) | std::to_integer<std::uint64_t>(buffer[i]);
  if (hlen > size - 8)
    return make_error(file + ": the header length at byte 0 says " + std::to_string(hlen) +
                      " bytes, past the end of the file (" + std::to_string(size) +
                      " bytes); the file is truncated or not safetensors");
  const char* hbegin = reinterpret_cast<const char*>(buffer.data() + 8);
  if (status deep = check_json_depth(std::string_view(hbegin, hlen), file + ": the header");
      !deep)
    return make_error(deep.message());
  json header;
  try {
    header = json::parse(hbegin, hbegin + hlen);
  } catch (const json::parse_error& e) {
    return make_error(file + ": the header (bytes 8.." + std::to_string(8 + hlen) +
                      ") is not valid JSON, near file byte " + std::to_string(8 + e.byte) +
                      ": " + e.what());
  } catch (const json::exception& e) {  // a number past a double's range, such as 1e999
    return make_error(file + ": the header (bytes 8.." + std::to_string(8 + hlen) +
                      ") is not valid JSON: " + e.what());
  }
  if (!header.is_object()) return make_error(file + ": the header is JSON but not an object");

  safetensors_file out;
  out.source = std::move(source);
  out.data_start = 8 + static_cast<std::size_t>(hlen);
  const std::uint64_t data_size = size - out.data_start;
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) return make_error(file + ": __metadata__ is not an object");
      for (const auto& [mk, mv] : value.items()) {
        if (!mv.is_string())
          return make_error(file + ": __metadata__ value for " + mk + " is not a string");
        out.metadata[mk] = mv.get<std::string>();
      }
      continue;
    }
    auto info = parse_entry(key, value, file + ": tensor " + key);
    if (!info) return info.err();
    // In data bytes as the header gives them, and in file bytes where that does not wrap.
    if (info->end > data_size)
      return make_error(
          file + " is truncated or corrupt: tensor " + key + " ends at data byte " +
          std::to_string(info->end) +
          (info->end <= UINT64_MAX - out.data_start
               ? " (file byte " + std::to_string(out.data_start + info->end) + ")"
               : std::string(" (past 2^64 as a file byte)")) +
          ", but the file has " + std::to_string(size) + " bytes, " + std::to_string(data_size) +
          " of them after the header");
    out.tensors.push_back(std::move(*info));
  }
  std::sort(out.tensors.begin(), out.tensors.end(), [](const auto& a, const auto& b) {
    return a.begin != b.begin ? a.begin < b.begin : a.end < b.end;
  });
  // The data section must be covered exactly: no overlaps, no gaps, nothing after the last tensor.
  std::uint64_t at = 0;
  const safetensors_info* prev = nullptr;
  for (const auto& t : out.tensors) {
    if (t.begin < at)
      return make_error(file + ": tensor " + t.name + " (data bytes " + std::to_string(t.begin) +
                        ".." + std::to_string(t.end) + ") overlaps tensor " + prev->name +
                        " (ending at data byte " + std::to_string(at) + ")");
    if (t.begin > at)
      return make_error(file + ": data bytes " + std::to_string(at) + ".." +
                        std::to_string(t.begin) + " before tensor " + t.name +
                        " belong to no tensor");
    at = t.end;
    prev = &t;
  }
  if (at != data_size)
    return make_error(file + ": " + std::to_string(data_size - at) +
                      " bytes after the last tensor, from file byte " +
                      std::to_string(out.data_start + at) + ", belong to no tensor");
  out.buffer = std::move(buffer);
  return out;
}

result<safetensors_file> read_safetensors(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return make_error("checkpoint " + path + " is a directory; give the .safetensors file in it");
  if (status s = check_input_file(path, "checkpoint"); !s) return make_error(s.message());
  std::ifstream in(path, std::ios::binary | std::ios::ate);
  if (!in) return make_error("cannot open checkpoint " + path + " (missing or unreadable)");
  const std::streamsize size = in.tellg();
  if (size < 0) return make_error("cannot read checkpoint " + path + ": not a regular file");
  in.seekg(0);
  std::vector<std::byte> buffer(static_cast<std::size_t>(size));
  if (!in.read(reinterpret_cast<char*>(buffer.data()), size))
    return make_error("cannot read checkpoint " + path);
  return parse_safetensors(std::move(buffer), path);
}

template <class T>
status load_into(const safetensors_file& file, std::span<const load_target<T>> targets) {
  for (const auto& t : targets) {
    const auto* info = file.find(t.name);
    if (!info) return make_error("checkpoint " + file.source + " has no tensor " + t.name);
    if (info->shape != t.shape)
      return make_error("checkpoint " + file.source + ": tensor " + t.name + " has shape " +
                        shape_string(info->shape) + ", expected " + shape_string(t.shape));
    if (t.dst.size() != static_cast<std::size_t>(numel(t.shape)))
      return make_error("load_into: the buffer for " + t.name + " holds " +
                        std::to_string(t.dst.size()) + " elements, shape " +
                        shape_string(t.shape) + " needs " + std::to_string(numel(t.shape)));
    const std::byte* src = file.bytes_of(*info).data();
    switch (info->type) {
      case dtype::f32: convert<T, float>(t.dst, src); break;
      case dtype::f64: convert<T, double>(t.dst, src); break;
      case dtype::i32:
        return make_error("checkpoint " + file.source + ": tensor " + t.name +
                          " has dtype I32, expected floating point (F32 or F64)");
    }
  }
  return {};
}

template status load_into<float>(const safetensors_file&, std::span<const load_target<float>>);
template status load_into<double>(const safetensors_file&, std::span<const load_target<double>>);

result<std::vector<tensor>> load_tensors(const safetensors_file& file,
                                         std::span<const tensor_spec> specs) {
  std::vector<tensor> out;
  std::vector<load_target<float>> targets;
  out.reserve(specs.size());
  for (const auto& s : specs) {
    out.emplace_back(s.shape, dtype::f32);
    targets.push_back({s.name, s.shape, out.back().span<float>()});
  }
  if (auto st = load_into<float>(file, targets); !st) return make_error(st.message());
  return out;
}

}  // namespace pipeworks
