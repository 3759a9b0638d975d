// Labelled images kept compact in memory (uint8), normalised per batch: the dataset behind
// the IDX (MNIST, Fashion-MNIST) and CIFAR-10 readers.
#pragma once

#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/data/dataset.h"

namespace zerotrain::data {

class ImageDataset final : public Dataset {
 public:
  // images (N, C, H, W) uint8, labels (N,) int64 in [0, classes): the readers check both.
  // The description is `name` followed by the counts: "Fashion-MNIST train (60000 images,
  // 1x28x28, 10 classes)".
  ImageDataset(at::Tensor images, at::Tensor labels, int64_t classes, const std::string& name);

  int64_t size() const override;
  const DatasetInfo& info() const override { return info_; }
  // inputs (B, C, H, W) fp32 as torchvision's ToTensor() then Normalize(0.5, 0.5) computes
  // them: pixel / 255, then (x - 0.5) / 0.5, in that order so the values match bit for bit.
  Batch get(const std::vector<int64_t>& indices) const override;

  const at::Tensor& images() const { return images_; }
  const at::Tensor& labels() const { return labels_; }

 private:
  at::Tensor images_;   // (N, C, H, W) uint8, contiguous
  at::Tensor labels_;   // (N,) int64
  DatasetInfo info_;
};

}  // namespace zerotrain::data
