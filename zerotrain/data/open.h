// A dataset by its spec, the name the Trainer is given (docs/data.md):
//
//   fashion-mnist    the Debian package dataset-fashion-mnist (/usr/share/datasets/fashion-mnist)
//   mnist:PATH       a folder with the four MNIST-named IDX files, gzip-compressed or not:
//   idx:PATH           {train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz]
//   cifar10:PATH     CIFAR-10's binary batches (PATH or PATH/cifar-10-batches-bin)
//   text:PATH        a plain text file, byte-level tokens in blocks of block_size
//   kjv              the King James Bible (Debian packages bible-kjv-text and bible-kjv)
//
// `synthetic` is the Trainer's own (SyntheticDataset) and is not opened here.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "zerotrain/data/dataset.h"
#include "zerotrain/data/kjv.h"

namespace zerotrain::data {

inline constexpr const char* kFashionMnistDir = "/usr/share/datasets/fashion-mnist";

struct OpenOptions {
  int64_t block_size = 256;   // text: tokens per sample
  int64_t limit = 0;          // use only the first `limit` samples (all when 0 or >= the size)
  std::string fashion_mnist_dir = kFashionMnistDir;
  KjvOptions kjv;
};

// Throws UsageError for a spec it does not know (naming the accepted ones), IoError for data
// that is missing or damaged (naming the file or the package to install).
std::shared_ptr<const Dataset> open_dataset(const std::string& spec, Split split, const OpenOptions& options = {});

// The first `limit` samples of `dataset` (all of it when 0 or >= its size). UsageError for a
// negative limit, naming `spec`.
std::shared_ptr<const Dataset> first_samples(std::shared_ptr<const Dataset> dataset, int64_t limit,
                                             const std::string& spec);

}  // namespace zerotrain::data
