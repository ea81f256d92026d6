// Flag checks and options that several subcommands share; see options.hpp.
#include "cli/options.hpp"

#include <exception>

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
          if (pos == s.size() && (allow_zero ? v >= 0 : v > 0)) return {};
        } catch (const std::exception&) {
        }
        return "must be " + what + ", got '" + s + "'";
      },
      allow_zero ? "NONNEGATIVE" : "POSITIVE");
}

}  // namespace

const CLI::Validator positive_int = number_check(true, false);
const CLI::Validator nonnegative_int = number_check(true, true);
const CLI::Validator positive_number = number_check(false, false);
const CLI::Validator nonnegative_number = number_check(false, true);

model_spec parse_model_flag(const std::string& model) {
  auto spec = parse_model_spec(model);
  if (!spec) throw CLI::ValidationError("--model", spec.message());
  return *spec;
}

void add_threads_option(CLI::App& sub, int& threads) {
  sub.add_option("--threads", threads, "CPU threads (0: all cores)")
      ->check(nonnegative_int)
      ->capture_default_str();
}

}  // namespace pipeworks::cli
