// param_set <-> safetensors, through the checkpoint layer's writer and checked loader.
#include "ops/model/param_io.hpp"

#include <vector>

namespace pipeworks {
namespace {

template <class T>
std::vector<safetensors_entry> entries_of(const param_set& p) {
  std::vector<safetensors_entry> out;
  for (const auto& e : p.entries()) out.push_back(entry_of(e.name, e.shape, p.values<T>(e)));
  return out;
}

template <class T>
status load_typed(const safetensors_file& file, param_set& p) {
  std::vector<load_target<T>> targets;
  for (const auto& e : p.entries()) targets.push_back({e.name, e.shape, p.values<T>(e)});
  return load_into<T>(file, targets);
}

}  // namespace

status save_params(const std::string& path, const param_set& p, const metadata_map& metadata) {
  if (p.type() == dtype::f64) return save_safetensors(path, entries_of<double>(p), metadata);
  return save_safetensors(path, entries_of<float>(p), metadata);
}

status load_params(const safetensors_file& file, param_set& p) {
  if (p.type() == dtype::f64) return load_typed<double>(file, p);
  return load_typed<float>(file, p);
}

status load_params(const std::string& path, param_set& p) {
  auto file = read_safetensors(path);
  if (!file) return file.err();
  return load_params(*file, p);
}

}  // namespace pipeworks
