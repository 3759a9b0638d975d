#include "zerotrain/data/image_dataset.h"

#include <ATen/ATen.h>

#include "zerotrain/core/error.h"

namespace zerotrain::data {

ImageDataset::ImageDataset(at::Tensor images, at::Tensor labels, int64_t classes, const std::string& name)
    : images_(images.contiguous()), labels_(labels.contiguous()) {
  ZT_INTERNAL_ASSERT(images_.dim() == 4 && images_.scalar_type() == at::kByte, name,
                     ": images must be (N, C, H, W) uint8");
  ZT_INTERNAL_ASSERT(labels_.dim() == 1 && labels_.scalar_type() == at::kLong && labels_.size(0) == images_.size(0),
                     name, ": labels must be (N,) int64, one per image");
  info_.task = Task::kClassification;
  info_.channels = images_.size(1);
  info_.height = images_.size(2);
  info_.width = images_.size(3);
  info_.classes = classes;
  info_.description = name + " (" + std::to_string(images_.size(0)) + " images, " + std::to_string(info_.channels) +
                      "x" + std::to_string(info_.height) + "x" + std::to_string(info_.width) + ", " +
                      std::to_string(classes) + " classes)";
}

int64_t ImageDataset::size() const { return images_.size(0); }

Batch ImageDataset::get(const std::vector<int64_t>& indices) const {
  check_sample_indices(indices, size(), info_);
  // index_select only reads the indices: a view of the caller's vector needs no copy.
  const at::Tensor index = at::from_blob(const_cast<int64_t*>(indices.data()),   // NOLINT: read only
                                         {static_cast<int64_t>(indices.size())}, at::kLong);
  at::Tensor inputs = images_.index_select(0, index).to(at::kFloat).div_(255).sub_(0.5).div_(0.5);
  return {std::move(inputs), labels_.index_select(0, index)};
}

}  // namespace zerotrain::data
