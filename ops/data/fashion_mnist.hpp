// Fashion-MNIST from Debian's dataset-fashion-mnist package: images (N, 784) as float in [0, 1]
// and labels (N) as int32 in 0..9.
#pragma once
#include <cstdint>
#include <string>

#include "base/result.hpp"
#include "ops/tensor.hpp"

namespace pipeworks {

inline constexpr const char* fashion_mnist_default_dir = "/usr/share/datasets/fashion-mnist";
inline constexpr int fashion_mnist_classes = 10;
inline constexpr int fashion_mnist_pixels = 28 * 28;

enum class dataset_split { train, test };

struct image_dataset {
  tensor images;  // (N, 784) f32, pixel / 255
  tensor labels;  // (N) i32
  std::int64_t size() const { return labels.empty() ? 0 : labels.dim(0); }
};

// Reads {train,t10k}-{images-idx3,labels-idx1}-ubyte.gz from dir. A missing file names its path
// and the Debian package; bad magic numbers, mismatched counts, labels outside 0..9 and truncated
// or corrupt gzip data are errors that name the file.
result<image_dataset> load_fashion_mnist(dataset_split split,
                                         const std::string& dir = fashion_mnist_default_dir);

}  // namespace pipeworks
