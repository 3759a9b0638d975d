// The interface every dataset of the Trainer implements (docs/data.md): a fixed number of
// samples, what they are for, and a batch of any of them.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "zerotrain/data/batch.h"

namespace zerotrain::data {

// What a dataset's samples are for: the Trainer picks the loss/metric from this.
enum class Task { kClassification, kLanguageModeling, kRegression };

// Which part of a dataset: the training samples or the held-out ones.
enum class Split { kTrain, kEval };
const char* split_name(Split split);   // "train", "eval"

struct DatasetInfo {
  Task task = Task::kClassification;
  int64_t channels = 0, height = 0, width = 0, classes = 0;   // images
  int64_t vocab_size = 0, block_size = 0;                     // text
  std::string description;   // "Fashion-MNIST train (60000 images, 1x28x28, 10 classes)"
};

class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual const DatasetInfo& info() const = 0;
  // The samples at `indices` stacked into one batch. Images: inputs float32 [B,C,H,W] normalised as
  // (pixel/255 - 0.5)/0.5, targets int64 [B]. Text: inputs int64 [B,T], targets int64 [B,T] (inputs
  // shifted by one). Thread-safe (const; called from prefetch threads). An index outside
  // [0, size()) is a UsageError.
  virtual Batch get(const std::vector<int64_t>& indices) const = 0;
};

// Throws UsageError naming the dataset when `indices` is empty or an index is outside [0, size).
void check_sample_indices(const std::vector<int64_t>& indices, int64_t size, const DatasetInfo& info);

}  // namespace zerotrain::data
