// Fashion-MNIST loading: two IDX files per split, checked against each other.
#include "ops/data/fashion_mnist.hpp"

#include <filesystem>
#include <system_error>

#include "ops/data/idx.hpp"

namespace pipeworks {

result<image_dataset> load_fashion_mnist(dataset_split split, const std::string& dir) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(dir, ec))
    return make_error("Fashion-MNIST is read from a directory of IDX files, and " + dir +
                      " is a file: give that directory (an mlp trains on Fashion-MNIST; a text "
                      "file trains a gpt model, --model gpt-tiny for one)");
  const std::string prefix = dir + "/" + (split == dataset_split::train ? "train" : "t10k");
  const std::string images_path = prefix + "-images-idx3-ubyte.gz";
  const std::string labels_path = prefix + "-labels-idx1-ubyte.gz";
  const std::string hint =
      "install the Debian package dataset-fashion-mnist (apt-get install dataset-fashion-mnist)";

  auto images = read_idx_ubyte(images_path, 3, hint);
  if (!images) return images.err();
  auto labels = read_idx_ubyte(labels_path, 1, hint);
  if (!labels) return labels.err();

  const auto& idims = images->dims;
  if (idims[1] != 28 || idims[2] != 28)
    return make_error("IDX file " + images_path + ": images are " + std::to_string(idims[1]) +
                      "x" + std::to_string(idims[2]) + ", expected 28x28");
  const std::int64_t n = idims[0];
  if (labels->dims[0] != n)
    return make_error("Fashion-MNIST files disagree: " + images_path + " has " +
                      std::to_string(n) + " images but " + labels_path + " has " +
                      std::to_string(labels->dims[0]) + " labels");

  image_dataset out{tensor({n, fashion_mnist_pixels}, dtype::f32), tensor({n}, dtype::i32)};
  float* px = out.images.data<float>();
  const auto& raw = images->values;
  for (std::size_t i = 0; i < raw.size(); ++i) px[i] = static_cast<float>(raw[i]) / 255.0f;
  std::int32_t* lab = out.labels.data<std::int32_t>();
  for (std::int64_t i = 0; i < n; ++i) {
    const int v = labels->values[static_cast<std::size_t>(i)];
    if (v >= fashion_mnist_classes)
      return make_error("IDX file " + labels_path + ": label " + std::to_string(v) +
                        " of sample " + std::to_string(i) + " (byte offset " +
                        std::to_string(8 + i) + ") is outside 0..9");
    lab[i] = v;
  }
  return out;
}

}  // namespace pipeworks
