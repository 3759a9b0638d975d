#include "tools/train_data.h"

#include <torch/torch.h>

#include "tools/tokenized_data.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/output_path.h"
#include "zerotrain/data/open.h"
#include "zerotrain/data/synthetic.h"
#include "zerotrain/models/models.h"

namespace zerotrain::tools {
namespace {

// Synthetic samples as a Dataset: sample i of the train set is SyntheticDataset's sample i,
// of the eval set sample kEvalOffset + i (a pure function of the seed and the index, so
// disjoint from the training samples).
class SyntheticSource final : public data::Dataset {
 public:
  static constexpr int64_t kTrainSize = 65536, kEvalSize = 1024, kEvalOffset = int64_t{1} << 40;
  SyntheticSource(const std::string& model, int64_t dim0, int64_t dim1, uint64_t seed, data::Split split, int64_t limit)
      : samples_(model, dim0, dim1, seed),
        offset_(split == data::Split::kEval ? kEvalOffset : 0),
        size_(split == data::Split::kEval ? kEvalSize : kTrainSize) {
    if (limit > 0) size_ = std::min(size_, limit);
    info_.task = model == "gpt" ? data::Task::kLanguageModeling : data::Task::kRegression;
    info_.description = "synthetic " + model + " data, " + std::string(data::split_name(split)) + " (" +
                        std::to_string(size_) + " samples)";
  }
  int64_t size() const override { return size_; }
  const data::DatasetInfo& info() const override { return info_; }
  data::Batch get(const std::vector<int64_t>& indices) const override {
    data::check_sample_indices(indices, size_, info_);
    std::vector<at::Tensor> inputs, targets;
    for (int64_t i : indices) {
      auto one = samples_.batch(offset_ + i, 1);
      inputs.push_back(one.inputs);
      targets.push_back(one.targets);
    }
    return {torch::cat(inputs), torch::cat(targets)};
  }

 private:
  data::SyntheticDataset samples_;
  int64_t offset_, size_;
  data::DatasetInfo info_;
};

models::DataShape shape_of(const data::DatasetInfo& info, const std::string& spec) {
  models::DataShape shape;
  shape.name = spec;
  if (info.task == data::Task::kLanguageModeling) {
    shape.kind = models::DataShape::Kind::kText;
    shape.vocab_size = info.vocab_size;
  } else {
    shape.kind = models::DataShape::Kind::kImages;
    shape.channels = info.channels;
    shape.height = info.height;
    shape.width = info.width;
    shape.classes = info.classes;
  }
  return shape;
}

}  // namespace

TrainData open_train_data(const TrainDataOptions& o) {
  // 0 is the only "all"; a negative count is a mistake, not another way to say it.
  ZT_CHECK(o.max_train_samples >= 0, UsageError, "--max_train_samples ", o.max_train_samples,
           ": must be at least 0 (0: all samples)");
  ZT_CHECK(o.max_eval_samples >= 0, UsageError, "--max_eval_samples ", o.max_eval_samples,
           ": must be at least 0 (0: all samples)");
  if (is_hf_model(o.model)) return open_tokenized_train_data(o);
  ZT_CHECK(o.tokenizer.empty(), UsageError, "--tokenizer ", o.tokenizer, ": only --model hf:DIR tokenises its data; --model ",
           o.model, " reads ", o.spec, " as it is (docs/data.md)");
  TrainData out;
  if (o.spec == "synthetic") {
    out.shape.name = "synthetic";
    const auto s = models::shape_of(o.model, o.model_config);
    ZT_CHECK(s.gpt || s.mlp, UsageError, "--dataset synthetic: --model ", o.model,
             " has no synthetic data (mlp and gpt have); give an image dataset such as fashion-mnist");
    const int64_t dim0 = s.gpt ? s.gpt->vocab_size : s.mlp->n_in, dim1 = s.gpt ? s.gpt->block_size : s.mlp->n_out;
    const auto seed = static_cast<uint64_t>(o.seed);
    out.train = std::make_shared<SyntheticSource>(o.model, dim0, dim1, seed, data::Split::kTrain, o.max_train_samples);
    out.eval = std::make_shared<SyntheticSource>(o.model, dim0, dim1, seed, data::Split::kEval, o.max_eval_samples);
    return out;
  }
  data::OpenOptions open;
  if (o.model == "gpt") {
    // The text's blocks are the model's context (the byte vocabulary is 256 tokens).
    const auto s = models::shape_of("gpt", o.model_config, {.kind = models::DataShape::Kind::kText, .vocab_size = 256,
                                                            .name = o.spec});
    open.block_size = s.gpt->block_size;
  }
  open.limit = o.max_train_samples;
  out.train = data::open_dataset(o.spec, data::Split::kTrain, open);
  open.limit = o.max_eval_samples;
  out.eval = data::open_dataset(o.spec, data::Split::kEval, open);
  out.shape = shape_of(out.train->info(), o.spec);
  // KIND:PATH names the data's file or folder: no output of the run may be written over it.
  if (const size_t colon = o.spec.find(':'); colon != std::string::npos) {
    files::register_input(o.spec.substr(colon + 1), "dataset file");
  }
  return out;
}

}  // namespace zerotrain::tools
