// The module's tensors that are not trained: its buffers and frozen parameters, whole, in
// rank 0's file.
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include "zerotrain/checkpoint/protocol/tensor_dtype.h"
#include "zerotrain/core/error.h"
#include "zerotrain/engine/checkpoint_providers/providers.h"
#include "zerotrain/engine/engine_state.h"

namespace zerotrain::engine::detail {
namespace {

std::vector<std::pair<std::string, at::Tensor>> buffers(EngineState& s) {
  std::vector<std::pair<std::string, at::Tensor>> out;
  for (const auto& item : s.model->named_buffers()) out.emplace_back(item.key(), item.value());
  return out;
}

checkpoint::WholeTensor record(const std::string& name, const at::Tensor& t) {
  return {name, {t.sizes().begin(), t.sizes().end()},
          std::string(checkpoint::dtype_tag(checkpoint::checkpoint_dtype(t.scalar_type())))};
}

class ModuleTensors final : public checkpoint::StateProvider {
 public:
  ModuleTensors(EngineState& s, const CheckpointLoadOptions& options) : s_(s), options_(options) {}

  void save(checkpoint::RankFileContents& file) override {
    if (file.rank() != 0) return;
    for (const auto& [name, t] : buffers(s_)) file.add("buffer/" + name, t);
    for (const auto& [name, t] : frozen_parameters(s_)) file.add("frozen/" + name, t);
  }

  void describe(checkpoint::Manifest& m) override {
    for (const auto& [name, t] : buffers(s_)) m.buffers.push_back(record(name, t));
    for (const auto& [name, t] : frozen_parameters(s_)) m.frozen.push_back(record(name, t));
  }

  // Read in host memory now; the commit copies each into the model's tensor, on whatever device.
  void plan_load(checkpoint::LoadPlan& plan) override {
    const checkpoint::Manifest& m = plan.manifest();
    for (const auto& [name, t] : buffers(s_)) plan_one(plan, m.buffers, "buffer/", name, t);
    for (const auto& [name, t] : frozen_parameters(s_)) plan_one(plan, m.frozen, "frozen/", name, t);
  }

  void commit_load(const checkpoint::Manifest&) override {
    at::NoGradGuard no_grad;
    for (auto& [target, value] : read_) target.copy_(value);
  }

 private:
  void plan_one(checkpoint::LoadPlan& plan, const std::vector<checkpoint::WholeTensor>& saved, const std::string& prefix,
                const std::string& name, const at::Tensor& like) {
    const std::string file = plan.manifest_file();
    for (const auto& w : saved) {
      if (w.name != name) continue;
      const std::string key = prefix + name;
      const auto dtype = checkpoint::dtype_from_tag(w.dtype);
      ZT_CHECK(dtype.has_value(), CheckpointError, file, ": ", key, " has an unknown dtype ", w.dtype);
      ZT_CHECK(c10::IntArrayRef(w.shape) == like.sizes(), CheckpointError, file, ": ", key, " has shape ",
               c10::IntArrayRef(w.shape), " but the model's is ", like.sizes(), " (a different model?)");
      read_.emplace_back(like, plan.read_now(0, key, *dtype, w.shape));
      return;
    }
    ZT_CHECK(!options_.load_module_strict, CheckpointError, file, ": ", prefix == "buffer/" ? "buffer " : "frozen parameter ",
             name, " of the model is not in the checkpoint (a different model? load_module_strict=false skips it)");
  }

  EngineState& s_;
  const CheckpointLoadOptions& options_;
  std::vector<std::pair<at::Tensor, at::Tensor>> read_;   // (model tensor, its saved value)
};

}  // namespace

std::unique_ptr<checkpoint::StateProvider> module_tensors_provider(EngineState& s, const CheckpointLoadOptions& options) {
  return std::make_unique<ModuleTensors>(s, options);
}

}  // namespace zerotrain::engine::detail
