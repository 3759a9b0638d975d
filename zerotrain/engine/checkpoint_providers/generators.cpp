// Each rank's random generators: the CPU's ("rng/cpu"), and on a GPU engine its device's
// ("rng/cuda"). They load only at the world size they were saved at (rank r's state goes to
// rank r) and not with load_module_only.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>

#include <mutex>

#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/core/error.h"
#include "zerotrain/engine/checkpoint_providers/providers.h"
#include "zerotrain/engine/engine_state.h"

namespace zerotrain::engine::detail {
namespace {

constexpr const char* kCpuKey = "rng/cpu";
constexpr const char* kCudaKey = "rng/cuda";

at::Generator generator(const at::Device& device) {
  return device.is_cpu() ? at::detail::getDefaultCPUGenerator() : at::globalContext().defaultGenerator(device);
}

class Generators final : public checkpoint::StateProvider {
 public:
  Generators(EngineState& s, const CheckpointLoadOptions& options) : s_(s), options_(options) {}

  void save(checkpoint::RankFileContents& file) override {
    for (const auto& [key, device] : devices()) {
      at::Generator gen = generator(device);
      std::lock_guard<std::mutex> lock(gen.mutex());
      file.add(key, gen.get_state());
    }
  }

  void describe(checkpoint::Manifest& m) override {
    m.rng_saved = true;
    if (s_.device.is_cuda()) m.rank_tensors.push_back({kCudaKey, "U8"});
  }

  void plan_load(checkpoint::LoadPlan& plan) override {
    const checkpoint::Manifest& m = plan.manifest();
    if (options_.load_module_only || !m.rng_saved || m.world_size != plan.world_size()) return;
    const int rank = plan.rank();
    for (const auto& [key, device] : devices()) {
      const checkpoint::TensorEntry* e = plan.reader().header(rank).find(key);
      // A checkpoint saved on the CPU has no device generator: the device's keeps its state.
      if (e == nullptr && key == kCudaKey) continue;
      ZT_CHECK(e != nullptr && e->dtype == checkpoint::Dtype::kU8, CheckpointError, plan.rank_file(rank),
               ": has no generator state ", key, " although the manifest says it was saved");
      states_.emplace_back(device, plan.read_now(rank, key, checkpoint::Dtype::kU8, {e->nbytes()}));
    }
  }

  void commit_load(const checkpoint::Manifest&) override {
    for (const auto& [device, state] : states_) {
      at::Generator gen = generator(device);
      std::lock_guard<std::mutex> lock(gen.mutex());
      gen.set_state(state);
    }
  }

 private:
  std::vector<std::pair<std::string, at::Device>> devices() const {
    std::vector<std::pair<std::string, at::Device>> out{{kCpuKey, at::Device(at::kCPU)}};
    if (s_.device.is_cuda()) out.emplace_back(kCudaKey, s_.device);
    return out;
  }

  EngineState& s_;
  const CheckpointLoadOptions& options_;
  std::vector<std::pair<at::Device, at::Tensor>> states_;
};

}  // namespace

std::unique_ptr<checkpoint::StateProvider> generators_provider(EngineState& s, const CheckpointLoadOptions& options) {
  return std::make_unique<Generators>(s, options);
}

}  // namespace zerotrain::engine::detail
