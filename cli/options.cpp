// Flag checks and options that several subcommands share; see options.hpp.
#include "cli/options.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <exception>
#include <filesystem>

#include "ops/checkpoint/atomic_file.hpp"

namespace pipeworks::cli {
namespace {

CLI::Validator number_check(bool integer, bool allow_zero) {
  const std::string what = std::string(allow_zero ? "a non-negative " : "a positive ") +
                           (integer ? "integer" : "number");
  return CLI::Validator(
      [=](std::string& s) -> std::string {
        try {
          std::size_t pos = 0;
          const double v = integer ? static_cast<double>(std::stoll(s, &pos)) : std::stod(s, &pos);
          if (pos == s.size() && !std::isfinite(v))
            return "must be a finite number, got '" + s + "'";
          if (pos == s.size() && (allow_zero ? v >= 0 : v > 0)) return {};
        } catch (const std::exception&) {
        }
        return "must be " + what + ", got '" + s + "'";
      },
      allow_zero ? "NONNEGATIVE" : "POSITIVE");
}

std::string gib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

}  // namespace

const CLI::Validator seed_value(
    [](std::string& s) -> std::string {
      std::uint64_t v = 0;
      const auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
      if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos ||
          ec != std::errc() || end != s.data() + s.size())
        return "must be a whole number in 0..2^64-1, got '" + s + "'";
      return {};
    },
    "0..2^64-1");

const CLI::Validator thread_count(
    [](std::string& s) -> std::string {
      std::size_t pos = 0;
      try {
        const long long v = std::stoll(s, &pos);
        if (pos == s.size() && v >= 0 && v <= max_threads) return {};
      } catch (const std::exception&) {
      }
      return "must be a whole number in 0.." + std::to_string(max_threads) + " (0: all cores), got '" +
             s + "'";
    },
    "0..4096");

const CLI::Validator positive_int = number_check(true, false);
const CLI::Validator nonnegative_int = number_check(true, true);
const CLI::Validator positive_number = number_check(false, false);
const CLI::Validator nonnegative_number = number_check(false, true);

model_spec parse_model_flag(const std::string& model) {
  auto spec = parse_model_spec(model);
  if (!spec) throw CLI::ValidationError("--model", spec.message());
  return *spec;
}

double physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<double>(pages) * static_cast<double>(page) : 0;
}

void check_memory(const model<float>& net, int param_copies, std::int64_t samples_per_pass,
                  double data_bytes, const std::string& flag, const std::string& hint) {
  double params = 0, per_sample = 0, widest = 0;
  for (const layer_cost& c : net.costs()) {
    params += static_cast<double>(c.param_bytes);
    per_sample += static_cast<double>(c.saved_bytes_per_sample);
    widest = std::max(widest, static_cast<double>(c.output_bytes_per_sample));
  }
  // Parameters (and gradients, optimizer state), every saved activation, and the widest output
  // twice over (a layer's output and the gradient flowing back through it).
  const double need = params * param_copies + data_bytes +
                      static_cast<double>(samples_per_pass) * (per_sample + 2 * widest);
  const double have = physical_memory_bytes();
  if (have > 0 && need > have) {
    // When one sample per pass is already too much, fewer samples cannot help: the model can.
    // (The data's bytes are left out: they grow with the batch, which the hint lowers.)
    const double one = params * param_copies + per_sample + 2 * widest;
    throw CLI::ValidationError(
        one > have ? "--model" : flag, net.name() + " at " + std::to_string(samples_per_pass) +
                  " samples per pass needs about " + gib(need) + " of memory, more than this "
                  "machine's " + gib(have) + "; " +
                  (one > have ? "even one sample needs " + gib(one) +
                                    ": choose a smaller model (its width, layers or context)"
                              : hint));
  }
}

void check_output_path(const std::string& path, const std::string& flag) {
  namespace fs = std::filesystem;
  std::error_code ec;
  const fs::path target(path);
  if (fs::is_directory(fs::symlink_status(target, ec)))
    throw CLI::ValidationError(flag, path + " is a directory; give a file name inside it");
  if (status s = check_output_target(path); !s) throw CLI::ValidationError(flag, s.message());
  const fs::path dir = target.has_parent_path() ? target.parent_path() : fs::path(".");
  if (fs::exists(dir, ec) && !fs::is_directory(dir, ec))
    throw CLI::ValidationError(flag, dir.string() + " (in " + path + ") is a file, not a "
                                         "directory; choose another path");
  if (!fs::is_directory(dir, ec))
    throw CLI::ValidationError(flag, "the directory " + dir.string() + " of " + path +
                                         " does not exist; create it first (mkdir -p " +
                                         dir.string() + ") or choose another path");
  if (status s = probe_writable_dir(dir.string()); !s) throw CLI::ValidationError(flag, s.message());
}

namespace {

// The file a path names, resolved as far as it exists (symbolic links, "..", "."), to compare.
std::filesystem::path resolved(const std::string& path) {
  std::error_code ec;
  auto p = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  return ec ? std::filesystem::path(path).lexically_normal() : p;
}

}  // namespace

void check_outputs(const std::vector<flag_path>& outputs, const std::vector<flag_path>& inputs,
                   const std::vector<flag_path>& input_dirs) {
  std::vector<std::pair<std::filesystem::path, const flag_path*>> seen;
  for (const flag_path& out : outputs) {
    if (out.path.empty()) continue;
    check_output_path(out.path, out.flag);
    const auto file = resolved(out.path);
    for (const auto& [other, given] : seen)
      if (other == file)
        throw CLI::ValidationError(
            out.flag, out.path + " is also the " + given->flag + " file (" + given->path +
                          "): the later write would replace the earlier; give each output its "
                          "own path");
    for (const flag_path& in : inputs)  // an input that is no file (a preset's name) is safe
      if (!in.path.empty() && std::filesystem::exists(in.path) && resolved(in.path) == file)
        throw CLI::ValidationError(out.flag, out.path + " is the " + in.flag + " input (" +
                                                 in.path + "): writing it would destroy what "
                                                 "the run reads; choose another path");
    for (const flag_path& dir : input_dirs) {  // a data or checkpoint directory belongs to the run
      if (dir.path.empty()) continue;
      const auto root = resolved(dir.path);
      if (!std::filesystem::exists(dir.path)) {  // made by the run (a new --checkpoint-dir)
        if (root == file)
          throw CLI::ValidationError(out.flag, out.path + " is the " + dir.flag + " directory the "
                                               "run will make; choose another path");
        continue;
      }
      if (!std::filesystem::is_directory(dir.path)) continue;
      const auto rel = file.lexically_relative(root);
      if (!rel.empty() && *rel.begin() != "..")
        throw CLI::ValidationError(out.flag, out.path + " lies inside the " + dir.flag +
                                                 " directory " + dir.path +
                                                 ", which the run reads (or writes its "
                                                 "checkpoints to): writing it could destroy what "
                                                 "is there; choose a path outside it");
    }
    seen.emplace_back(file, &out);
  }
}

void add_threads_option(CLI::App& sub, int& threads) {
  sub.add_option("--threads", threads, "CPU threads (0: all cores)")
      ->check(thread_count)
      ->capture_default_str();
}

void refuse_empty_values(const CLI::App& app) {
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() == 0) continue;
    for (const std::string& value : opt->results())
      if (value.empty()) {
        const std::string name =
            opt->get_lnames().empty() ? opt->get_name() : "--" + opt->get_lnames().front();
        throw CLI::ValidationError(name, opt->results().size() > 1 || opt->get_delimiter() != '\0'
                                             ? "has an empty item (a comma too many?): give each "
                                               "a value (see --help)"
                                             : "is empty: give a value (see --help)");
      }
  }
  for (const CLI::App* sub : app.get_subcommands()) refuse_empty_values(*sub);
}

}  // namespace pipeworks::cli
