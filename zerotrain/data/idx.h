// IDX files, the format of MNIST and Fashion-MNIST, raw or gzip-compressed (docs/data.md).
//
// An IDX file is a 4-byte magic number (0, 0, the element type: 0x08 for uint8, the number of
// dimensions), one big-endian uint32 per dimension, then the elements. MNIST-style datasets
// come as two files: images 0x00000803 (count, rows, columns) and labels 0x00000801 (count).
// Every file is checked against its header: a truncated file, one with bytes after its data,
// a wrong magic number or element type is an IoError naming the file, what was expected and
// what was found.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "zerotrain/data/image_dataset.h"

namespace zerotrain::data {

// A uint8 IDX file with `dims` dimensions, read whole: a tensor of its shape. Gzip-compressed
// files (recognised by their content, not their name) are decompressed on the way, and the
// sizes in messages are then decompressed sizes.
at::Tensor read_idx_uint8(const std::filesystem::path& path, int64_t dims);

// An image file (N, H, W) and its label file (N) as a dataset of N one-channel images.
// The IDX format does not record the number of classes, so it is an argument: 10 for MNIST
// and Fashion-MNIST. A label >= classes is an IoError naming the label file and the sample,
// which also catches a label file from another dataset. `name` starts the description
// ("Fashion-MNIST train").
std::shared_ptr<const ImageDataset> load_idx_pair(const std::filesystem::path& images_path,
                                                  const std::filesystem::path& labels_path, const std::string& name,
                                                  int64_t classes = 10);

}  // namespace zerotrain::data
