// CIFAR-10, binary version (docs/data.md): data_batch_1.bin .. data_batch_5.bin (train,
// 50000 images) and test_batch.bin (eval, 10000), each a run of 3073-byte records: one label
// byte (0..9), then a 3x32x32 image, channel-major (all red, then green, then blue).
#pragma once

#include <filesystem>
#include <memory>

#include "zerotrain/data/image_dataset.h"

namespace zerotrain::data {

// The .bin files' folder is `path` itself or `path`/cifar-10-batches-bin (the archive's top
// folder). A file whose size is not a positive multiple of 3073 bytes, or a label above 9,
// is an IoError naming the file.
std::shared_ptr<const ImageDataset> load_cifar10(const std::filesystem::path& path, Split split);

}  // namespace zerotrain::data
