// Streaming SHA-256 through OpenSSL's EVP interface, which picks the CPU's SHA extensions when
// there are any; and the digest of a file read in large chunks.
#include "base/sha256.hpp"

#include <fcntl.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <vector>

namespace pipeworks {

struct sha256::state {
  EVP_MD_CTX* ctx = nullptr;
  ~state() { EVP_MD_CTX_free(ctx); }
};

sha256::sha256() : state_(std::make_unique<state>()) {
  state_->ctx = EVP_MD_CTX_new();
  if (state_->ctx == nullptr || EVP_DigestInit_ex(state_->ctx, EVP_sha256(), nullptr) != 1)
    throw pipeworks_error("libcrypto cannot start a SHA-256 digest");
}
sha256::~sha256() = default;
sha256::sha256(sha256&&) noexcept = default;
sha256& sha256::operator=(sha256&&) noexcept = default;

void sha256::update(std::span<const std::byte> bytes) {
  if (bytes.empty()) return;
  if (EVP_DigestUpdate(state_->ctx, bytes.data(), bytes.size()) != 1)
    throw pipeworks_error("libcrypto failed to update a SHA-256 digest");
}

std::string sha256::hex_digest() {
  unsigned char md[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  if (EVP_DigestFinal_ex(state_->ctx, md, &n) != 1)
    throw pipeworks_error("libcrypto failed to finish a SHA-256 digest");
  static constexpr char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(2 * n);
  for (unsigned int i = 0; i < n; ++i) {
    out.push_back(digits[md[i] >> 4]);
    out.push_back(digits[md[i] & 0xf]);
  }
  return out;
}

result<std::string> sha256_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return make_error("cannot open " + path + " to check its sha256: " + std::strerror(errno));
  ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
  std::vector<std::byte> buffer(std::size_t{8} << 20);
  sha256 h;
  for (;;) {
    const ssize_t n = ::read(fd, buffer.data(), buffer.size());
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const std::string why = std::strerror(errno);
      ::close(fd);
      return make_error("cannot read " + path + " to check its sha256: " + why);
    }
    if (n == 0) break;
    h.update(std::span(buffer.data(), static_cast<std::size_t>(n)));
  }
  ::close(fd);
  return h.hex_digest();
}

}  // namespace pipeworks
