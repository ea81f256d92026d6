// Fuzz target: the model JSON reader. parse_model_spec takes only a path, so each input is
// written over one file per process under /tmp and read back as --model would read it.
#include <fcntl.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "ops/model/model_spec.hpp"

namespace {

// The file, kept open and rewritten in place: truncating it to zero before each write makes
// ext4 flush it on close (auto_da_alloc), a hundred times slower. Removed on a normal exit.
struct input_file {
  std::string path = "/tmp/pipeworks-fuzz-model-" + std::to_string(::getpid()) + ".json";
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0600);
  ~input_file() {
    ::close(fd);
    std::remove(path.c_str());
  }

  void write(const std::uint8_t* data, std::size_t size) const {
    if (fd < 0 || ::pwrite(fd, data, size, 0) != static_cast<ssize_t>(size) ||
        ::ftruncate(fd, static_cast<off_t>(size)) != 0)
      __builtin_trap();  // /tmp not writable: nothing could be tested
  }
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  static const input_file file;
  file.write(data, size);
  (void)pipeworks::parse_model_spec(file.path);
  return 0;
}
