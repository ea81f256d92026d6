// IDX ubyte files through zlib's gz* interface, which reads gzip and plain files alike.
#include "ops/data/idx.hpp"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <memory>

namespace pipeworks {
namespace {

struct gz_closer {
  void operator()(gzFile_s* f) const { gzclose(f); }
};
using gz_ptr = std::unique_ptr<gzFile_s, gz_closer>;

std::string gz_message(gzFile f) {
  int code = 0;
  const char* msg = gzerror(f, &code);
  return (code != Z_OK && msg && *msg) ? std::string(": ") + msg : std::string();
}

// Reads exactly n bytes; false on a short read (truncated or corrupt data).
bool read_exact(gzFile f, void* out, std::size_t n, std::size_t& got) {
  auto* p = static_cast<unsigned char*>(out);
  got = 0;
  while (got < n) {
    const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - got, 1u << 30));
    const int r = gzread(f, p + got, chunk);
    if (r <= 0) return false;
    got += static_cast<std::size_t>(r);
  }
  return true;
}

std::uint32_t big_endian_u32(const unsigned char* b) {
  return (std::uint32_t{b[0]} << 24) | (std::uint32_t{b[1]} << 16) | (std::uint32_t{b[2]} << 8) |
         std::uint32_t{b[3]};
}

}  // namespace

result<idx_array> read_idx_ubyte(const std::string& path, int expected_rank,
                                 const std::string& missing_hint) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    std::string msg = "IDX file " + path + " not found";
    if (!missing_hint.empty()) msg += "; " + missing_hint;
    return make_error(msg);
  }
  if (!std::filesystem::is_regular_file(path, ec))  // a FIFO would block the read forever
    return make_error("IDX file " + path + " is not a regular file (a directory, named pipe or "
                      "device): give the .gz or uncompressed IDX file itself");
  gz_ptr f(gzopen(path.c_str(), "rb"));
  if (!f) return make_error("cannot open IDX file " + path + " for reading");
  gzbuffer(f.get(), 1 << 18);

  unsigned char head[4];
  std::size_t got = 0;
  if (!read_exact(f.get(), head, 4, got))
    return make_error("IDX file " + path + " is truncated: no 4-byte magic number" +
                      gz_message(f.get()));
  const std::uint32_t magic = big_endian_u32(head);
  const std::uint32_t want = 0x00000800u | static_cast<std::uint32_t>(expected_rank);
  if (magic != want) {
    char buf[96];
    std::snprintf(buf, sizeof buf, "bad magic number 0x%08x (expected 0x%08x: ubyte, rank %d)",
                  magic, want, expected_rank);
    return make_error("IDX file " + path + ": " + buf);
  }

  idx_array out;
  std::uint64_t total = 1;
  for (int i = 0; i < expected_rank; ++i) {
    if (!read_exact(f.get(), head, 4, got))
      return make_error("IDX file " + path + " is truncated in its header (dimension " +
                        std::to_string(i) + ")" + gz_message(f.get()));
    const std::uint32_t d = big_endian_u32(head);
    out.dims.push_back(d);
    total *= d;
    if (total > (std::uint64_t{1} << 34))
      return make_error("IDX file " + path + ": header dimensions are implausibly large");
  }
  const std::size_t header_bytes = 4 + 4 * static_cast<std::size_t>(expected_rank);
  out.values.resize(static_cast<std::size_t>(total));
  if (!read_exact(f.get(), out.values.data(), out.values.size(), got))
    return make_error("IDX file " + path + " is truncated or corrupt: the header promises " +
                      std::to_string(total) + " data bytes, but decompression stopped after " +
                      std::to_string(got) + " (at uncompressed byte offset " +
                      std::to_string(header_bytes + got) + ")" + gz_message(f.get()));
  // One more read drives zlib to the end of the stream, where it checks the CRC.
  unsigned char extra;
  const int r = gzread(f.get(), &extra, 1);
  if (r > 0)
    return make_error("IDX file " + path + " has data after the " + std::to_string(total) +
                      " bytes its header promises (at uncompressed byte offset " +
                      std::to_string(header_bytes + total) + ")");
  if (r < 0) return make_error("IDX file " + path + " is corrupt" + gz_message(f.get()));
  return out;
}

}  // namespace pipeworks
