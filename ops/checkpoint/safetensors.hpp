// safetensors files: an 8-byte little-endian header length, a JSON header giving each tensor's
// dtype, shape and [begin, end) offsets into the data section, then the data. Write atomically;
// read with every offset checked; load into expected (name, shape) specs.
#pragma once
#include <cstddef>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "base/result.hpp"
#include "ops/checkpoint/atomic_file.hpp"
#include "ops/tensor.hpp"

namespace pipeworks {

using metadata_map = std::map<std::string, std::string>;

// One tensor to write: little-endian data of nbytes = numel(shape) * dtype_size(type).
struct safetensors_entry {
  std::string name;
  shape_t shape;
  dtype type = dtype::f32;
  const std::byte* data = nullptr;
  std::size_t nbytes = 0;
};
safetensors_entry entry_of(std::string name, const tensor& t);
safetensors_entry entry_of(std::string name, shape_t shape, std::span<const float> data);
safetensors_entry entry_of(std::string name, shape_t shape, std::span<const double> data);
safetensors_entry entry_of(std::string name, shape_t shape, std::span<const std::int32_t> data);

// Writes to a temporary file in path's directory, fsyncs it, then renames it over path, so a
// reader never sees a half-written checkpoint (write_file_atomic: a symbolic link or a directory
// at path is refused). Adds metadata "format": "pt" unless given. The tensors' bytes are written
// from where the entries point, hashed as they go: returns the file's size and sha256.
result<written_file> write_safetensors(const std::string& path,
                                       std::span<const safetensors_entry> entries,
                                       const metadata_map& metadata = {});
// write_safetensors without the size and hash.
status save_safetensors(const std::string& path, std::span<const safetensors_entry> entries,
                        const metadata_map& metadata = {});

struct safetensors_info {
  std::string name;
  dtype type = dtype::f32;
  shape_t shape;
  std::uint64_t begin = 0, end = 0;  // relative to the data section
};

// A whole file in memory, its header checked.
struct safetensors_file {
  std::string source;                    // the path, for messages
  std::vector<std::byte> buffer;         // the whole file
  std::size_t data_start = 0;            // 8 + header length
  std::vector<safetensors_info> tensors;  // in data-offset order
  metadata_map metadata;

  const safetensors_info* find(const std::string& name) const;
  std::span<const std::byte> bytes_of(const safetensors_info& info) const;
  // A copy of one tensor, in its own dtype; an error naming it when it is absent.
  result<tensor> get(const std::string& name) const;
};

// Rejects a truncated file, a header that is not JSON or runs past the end, unknown dtypes,
// shapes that disagree with their byte ranges, and overlapping, out-of-range or gapped offsets.
// Every message names the file and the tensor or the byte offset.
result<safetensors_file> read_safetensors(const std::string& path);
// The same checks over bytes already in memory; source names them in messages.
result<safetensors_file> parse_safetensors(std::vector<std::byte> buffer, std::string source);

// Where to load one tensor: its name, its expected shape and the caller's storage.
template <class T>
struct load_target {
  std::string name;
  shape_t shape;
  std::span<T> dst;  // numel(shape) elements
};

// Copies each target's tensor, converting F32/F64 to T. A missing tensor, a wrong shape (both
// shapes named) or an I32 tensor is an error. Tensors not asked for are ignored.
template <class T>
status load_into(const safetensors_file& file, std::span<const load_target<T>> targets);

struct tensor_spec {
  std::string name;
  shape_t shape;
};
// Loads the specs as new f32 tensors, in spec order, with load_into's checks.
result<std::vector<tensor>> load_tensors(const safetensors_file& file,
                                         std::span<const tensor_spec> specs);

}  // namespace pipeworks
