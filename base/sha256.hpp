// Streaming SHA-256 over OpenSSL's libcrypto (EVP), for checksums of checkpoint files: feed bytes
// as they are written or read, then take the lowercase hex digest.
#pragma once
#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "base/result.hpp"

namespace pipeworks {

class sha256 {
 public:
  sha256();  // throws pipeworks_error only if libcrypto cannot set up a digest (out of memory)
  ~sha256();
  sha256(sha256&&) noexcept;
  sha256& operator=(sha256&&) noexcept;
  sha256(const sha256&) = delete;
  sha256& operator=(const sha256&) = delete;

  void update(std::span<const std::byte> bytes);
  // The digest of everything fed so far, as 64 lowercase hex digits. Ends the stream: call it once.
  std::string hex_digest();

 private:
  struct state;
  std::unique_ptr<state> state_;
};

// The digest of a whole file, read in large chunks; an error names the path and the OS reason.
result<std::string> sha256_file(const std::string& path);

}  // namespace pipeworks
