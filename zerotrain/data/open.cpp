#include "zerotrain/data/open.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "zerotrain/core/error.h"
#include "zerotrain/core/strings.h"
#include "zerotrain/data/cifar10.h"
#include "zerotrain/data/idx.h"
#include "zerotrain/data/text.h"

namespace zerotrain::data {
namespace {

namespace fs = std::filesystem;

const std::vector<std::string> kSpecs = {"synthetic", "fashion-mnist", "mnist:PATH", "idx:PATH",
                                         "cifar10:PATH", "text:PATH",   "kjv"};

// The first `limit` samples of another dataset.
class FirstSamples final : public Dataset {
 public:
  FirstSamples(std::shared_ptr<const Dataset> inner, int64_t limit) : inner_(std::move(inner)), limit_(limit) {
    info_ = inner_->info();
    info_.description += ", first " + std::to_string(limit_) + " used";
  }
  int64_t size() const override { return limit_; }
  const DatasetInfo& info() const override { return info_; }
  Batch get(const std::vector<int64_t>& indices) const override {
    check_sample_indices(indices, limit_, info_);
    return inner_->get(indices);
  }

 private:
  std::shared_ptr<const Dataset> inner_;
  int64_t limit_;
  DatasetInfo info_;
};

// The MNIST file of `stem` in `folder`, compressed or not.
fs::path mnist_file(const fs::path& folder, const std::string& stem, const std::string& spec) {
  std::error_code ec;
  for (const fs::path& candidate : {folder / stem, folder / (stem + ".gz")}) {
    if (fs::exists(candidate, ec)) return candidate;
  }
  throw IoError(spec + ": no " + stem + " nor " + stem + ".gz in " + folder.string() +
                "; the folder needs the four MNIST-named IDX files: {train,t10k}-images-idx3-ubyte and "
                "{train,t10k}-labels-idx1-ubyte, each optionally .gz");
}

std::shared_ptr<const Dataset> open_idx_folder(const fs::path& folder, Split split, const std::string& spec,
                                               const std::string& name) {
  std::error_code ec;
  ZT_CHECK(fs::is_directory(folder, ec), IoError, spec, ": ", folder.string(),
           fs::exists(folder, ec) ? " is not a folder" : " does not exist",
           "; name the folder that holds the MNIST-named IDX files");
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  return load_idx_pair(mnist_file(folder, prefix + "-images-idx3-ubyte", spec),
                       mnist_file(folder, prefix + "-labels-idx1-ubyte", spec), name + " " + split_name(split));
}

std::shared_ptr<const Dataset> open_fashion_mnist(Split split, const OpenOptions& options) {
  std::error_code ec;
  const fs::path folder = options.fashion_mnist_dir;
  const std::string prefix = split == Split::kTrain ? "train" : "t10k";
  const fs::path images = folder / (prefix + "-images-idx3-ubyte.gz");
  const fs::path labels = folder / (prefix + "-labels-idx1-ubyte.gz");
  ZT_CHECK(fs::exists(images, ec) && fs::exists(labels, ec), IoError, "fashion-mnist: ", images.string(), " or ",
           labels.string(), " is missing: install the Debian package dataset-fashion-mnist (`apt-get install ",
           "dataset-fashion-mnist`, or run `bash scripts/setup.sh`), or name a copy of its files with the spec ",
           "mnist:PATH");
  return load_idx_pair(images, labels, std::string("Fashion-MNIST ") + split_name(split));
}

[[noreturn]] void unknown_spec(const std::string& spec) {
  std::vector<std::string> kinds;
  for (const std::string& s : kSpecs) kinds.push_back(s.substr(0, s.find(':')));
  std::string hint;
  if (const auto near = strings::closest_match(spec.substr(0, spec.find(':')), kinds)) {
    hint = "did you mean " + kSpecs[static_cast<size_t>(std::find(kinds.begin(), kinds.end(), *near) - kinds.begin())] +
           "? ";
  }
  throw UsageError("unknown dataset \"" + spec + "\"; " + hint + "known: " + strings::join_words(kSpecs, " and ") +
                   " (docs/data.md)");
}

std::shared_ptr<const Dataset> open_unlimited(const std::string& spec, Split split, const OpenOptions& options) {
  const size_t colon = spec.find(':');
  const std::string kind = spec.substr(0, colon);
  const std::string path = colon == std::string::npos ? "" : spec.substr(colon + 1);
  const bool takes_path = kind == "mnist" || kind == "idx" || kind == "cifar10" || kind == "text";
  if (takes_path) {
    ZT_CHECK(!path.empty(), UsageError, "dataset \"", spec, "\" needs a path: ", kind, ":PATH");
  } else if (kind == "fashion-mnist" || kind == "kjv" || kind == "synthetic") {
    ZT_CHECK(colon == std::string::npos, UsageError, "dataset \"", kind, "\" takes no path; write just ", kind);
  }
  if (kind == "fashion-mnist") return open_fashion_mnist(split, options);
  if (kind == "mnist") return open_idx_folder(path, split, spec, "MNIST");
  if (kind == "idx") return open_idx_folder(path, split, spec, "IDX " + fs::path(path).filename().string());
  if (kind == "cifar10") return load_cifar10(path, split);
  if (kind == "text") return load_text_file(path, split, options.block_size);
  if (kind == "kjv") return load_kjv(split, options.block_size, options.kjv);
  ZT_CHECK(kind != "synthetic", UsageError,
           "the synthetic dataset is built by the Trainer with its model (SyntheticDataset), not by open_dataset");
  unknown_spec(spec);
}

}  // namespace

std::shared_ptr<const Dataset> open_dataset(const std::string& spec, Split split, const OpenOptions& options) {
  ZT_CHECK(options.limit >= 0, UsageError, "dataset ", spec, ": limit is ", options.limit,
           "; use 0 for all samples or a positive count");
  return first_samples(open_unlimited(spec, split, options), options.limit, spec);
}

std::shared_ptr<const Dataset> first_samples(std::shared_ptr<const Dataset> dataset, int64_t limit,
                                             const std::string& spec) {
  ZT_CHECK(limit >= 0, UsageError, "dataset ", spec, ": limit is ", limit, "; use 0 for all samples or a positive count");
  if (limit == 0 || limit >= dataset->size()) return dataset;
  return std::make_shared<const FirstSamples>(std::move(dataset), limit);
}

}  // namespace zerotrain::data
