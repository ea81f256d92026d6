// Text corpus loading and window batching.
#include "ops/data/text.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include "ops/data/rng.hpp"

namespace fs = std::filesystem;

namespace pipeworks {
namespace {

status append_file(const fs::path& p, text_corpus& out) {
  std::ifstream in(p, std::ios::binary);
  if (!in) return make_error("cannot open text file " + p.string() + " for reading");
  const std::size_t at = out.bytes.size();
  std::error_code ec;
  const auto size = fs::file_size(p, ec);
  if (ec) return make_error("cannot read the size of text file " + p.string() + ": " + ec.message());
  out.bytes.resize(at + size);
  in.read(reinterpret_cast<char*>(out.bytes.data() + at), static_cast<std::streamsize>(size));
  if (static_cast<std::uintmax_t>(in.gcount()) != size)
    return make_error("short read from text file " + p.string() + ": got " +
                      std::to_string(in.gcount()) + " of " + std::to_string(size) + " bytes");
  out.sources.push_back(p.string());
  return {};
}

void fill_window(std::int32_t* in, std::int32_t* tg, const std::uint8_t* w, std::int64_t t) {
  for (std::int64_t j = 0; j < t; ++j) {
    in[j] = w[j];
    tg[j] = w[j + 1];
  }
}

}  // namespace

result<text_corpus> load_text(const std::string& path) {
  std::error_code ec;
  const fs::path p(path);
  const auto st = fs::status(p, ec);
  if (!fs::exists(st)) {
    std::string msg = "text path " + path + " not found";
    const std::string fortunes = fortunes_default_dir;
    if (path.rfind(fortunes, 0) == 0)
      msg += "; install the Debian package fortunes (apt-get install fortunes)";
    return make_error(msg);
  }
  if (!fs::is_directory(st) && !fs::is_regular_file(st))  // a FIFO would block the read forever
    return make_error("text path " + path + " is " + std::string(fs::is_fifo(st) ? "a named pipe" : "a device or socket") +
                      ", not a file or directory: give a text file or a folder of them");
  text_corpus out;
  if (fs::is_directory(st)) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(p, ec)) {
      if (e.is_symlink() || !e.is_regular_file()) continue;
      const auto ext = e.path().extension().string();
      if (ext == ".dat" || ext == ".u8") continue;
      files.push_back(e.path());
    }
    if (ec) return make_error("cannot list directory " + path + ": " + ec.message());
    std::sort(files.begin(), files.end());
    for (const auto& f : files)
      if (auto s = append_file(f, out); !s) return make_error(s.message());
  } else if (auto s = append_file(p, out); !s) {
    return make_error(s.message());
  }
  if (out.bytes.empty())
    return make_error("text path " + path + " holds no text (no non-empty regular files)");
  return out;
}

text_split split_text(std::span<const std::uint8_t> text, double validation_fraction) {
  const double f = std::clamp(validation_fraction, 0.0, 1.0);
  const auto held = static_cast<std::size_t>(std::llround(f * static_cast<double>(text.size())));
  const std::size_t cut = text.size() - std::min(held, text.size());
  return {text.first(cut), text.subspan(cut)};
}

result<token_batch> random_windows(std::span<const std::uint8_t> text, std::int64_t batch,
                                   std::int64_t context, std::uint64_t seed, std::uint64_t step) {
  if (batch <= 0 || context <= 0)
    return make_error("random_windows: batch (" + std::to_string(batch) + ") and context (" +
                      std::to_string(context) + ") must be positive");
  const auto n = static_cast<std::int64_t>(text.size());
  if (n < context + 1)
    return make_error("the text has " + std::to_string(n) + " bytes, fewer than one window of " +
                      std::to_string(context + 1) + " (context + 1)");
  token_batch out{tensor({batch, context}, dtype::i32), tensor({batch, context}, dtype::i32)};
  rng gen = rng::for_stream(seed, step);
  const auto starts = static_cast<std::uint64_t>(n - context);  // valid starts: 0..n-T-1
  for (std::int64_t b = 0; b < batch; ++b) {
    const auto s = static_cast<std::size_t>(gen.uniform(starts));
    fill_window(out.inputs.data<std::int32_t>() + b * context,
                out.targets.data<std::int32_t>() + b * context, text.data() + s, context);
  }
  return out;
}

result<token_batch> eval_windows(std::span<const std::uint8_t> text, std::int64_t count,
                                 std::int64_t context, const std::string& source) {
  if (count <= 0 || context <= 0)
    return make_error("eval_windows: window count (" + std::to_string(count) +
                      ") and context (" + std::to_string(context) + ") must be positive");
  const std::int64_t need = count * (context + 1);
  if (static_cast<std::int64_t>(text.size()) < need)
    return make_error(source + " has " + std::to_string(text.size()) + " bytes; " +
                      std::to_string(count) + " windows of " + std::to_string(context + 1) +
                      " bytes need " + std::to_string(need));
  token_batch out{tensor({count, context}, dtype::i32), tensor({count, context}, dtype::i32)};
  for (std::int64_t i = 0; i < count; ++i)
    fill_window(out.inputs.data<std::int32_t>() + i * context,
                out.targets.data<std::int32_t>() + i * context,
                text.data() + i * (context + 1), context);
  return out;
}

}  // namespace pipeworks
