// The weights the optimizer steps (fp32) and the optimizer's states, as fragments: each rank
// saves the pieces of each parameter it holds (checkpoint/fragments.h), and a load at any
// world size and stage reads the fragments that overlap what it holds, straight into the
// engine's buffers (no second copy of the model states).
#include <ATen/ATen.h>

#include <algorithm>
#include <array>
#include <map>
#include <unordered_set>

#include "zerotrain/checkpoint/fragments.h"
#include "zerotrain/core/error.h"
#include "zerotrain/engine/checkpoint_providers/providers.h"
#include "zerotrain/engine/engine_state.h"
#include "zerotrain/offload/optimizer_offload.h"

namespace zerotrain::engine::detail {
namespace {

using checkpoint::Fragment;

std::string first_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 5; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 5) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

class ModelStates final : public checkpoint::StateProvider {
 public:
  ModelStates(EngineState& s, const CheckpointLoadOptions& options) : s_(s), options_(options) {}

  void save(checkpoint::RankFileContents& file) override {
    const bool sharded = s_.traits().shards_optimizer;
    const std::vector<std::string> names = state_names();
    for (GroupState& g : s_.groups) {
      if (streamed()) {
        add_streamed(file, g, sharded);
        continue;
      }
      const at::Tensor weights = file.hold(g.stepped_weights());
      ZT_INTERNAL_ASSERT(weights.scalar_type() == at::kFloat, "the stepped weights are not fp32");
      std::vector<std::pair<std::string, at::Tensor>> sources{{"fp32", weights}};
      for (const std::string& name : names) {
        const auto& st = s_.optimizer->state(g.index);
        auto it = st.find(name);
        ZT_INTERNAL_ASSERT(it != st.end(), "optimizer state ", name, " missing in a group");
        sources.emplace_back(name, file.hold(it->second));
      }
      for (const auto& piece : checkpoint::saved_pieces(g.layout, sharded, file.world_size(), file.rank())) {
        const Fragment f{file.rank(), piece.in_param.offset, piece.in_param.end()};
        for (const auto& [state, tensor] : sources) {
          file.add_fp32_range(checkpoint::fragment_key(state, g.param_names[piece.param], f), tensor, piece.local_offset,
                              f.numel());
        }
      }
    }
  }

  void describe(checkpoint::Manifest& m) override {
    const int world = m.world_size;
    const bool sharded = s_.traits().shards_optimizer;
    m.zero_stage = s_.traits().number;
    m.model_dtype = dtype_name(s_.precision.model);
    if (s_.optimizer) {
      const checkpoint::Json config = s_.config.to_json();
      m.optimizer = {{"type", s_.optimizer->name()},
                     {"params", config.contains("optimizer") ? config["optimizer"].value("params", checkpoint::Json::object())
                                                             : checkpoint::Json::object()}};
      m.optimizer_states = state_names();
    }
    for (const GroupState& g : s_.groups) {
      m.groups.push_back({g.name, g.hyper.lr, g.hyper.weight_decay, s_.optimizer ? s_.optimizer->steps(g.index) : 0});
      std::vector<std::vector<Fragment>> fragments(g.params.size());
      for (int r = 0; r < world; ++r) {
        for (const auto& piece : checkpoint::saved_pieces(g.layout, sharded, world, r)) {
          fragments[piece.param].push_back({r, piece.in_param.offset, piece.in_param.end()});
        }
      }
      for (size_t i = 0; i < g.params.size(); ++i) {
        std::sort(fragments[i].begin(), fragments[i].end(), [](const Fragment& a, const Fragment& b) { return a.begin < b.begin; });
        const at::Tensor& p = g.params[i];
        m.params.push_back({g.param_names[i], {p.sizes().begin(), p.sizes().end()}, dtype_name(p.scalar_type()),
                            static_cast<int>(g.index), std::move(fragments[i])});
      }
    }
  }

  void plan_load(checkpoint::LoadPlan& plan) override {
    const checkpoint::Manifest& m = plan.manifest();
    const std::string file = plan.manifest_file();
    check_same_model(m, file);
    load_optimizer_ = s_.optimizer && options_.load_optimizer_states && !options_.load_module_only;
    if (load_optimizer_) {
      ZT_CHECK(!m.optimizer.is_null(), CheckpointError, file, ": the checkpoint has no optimizer state (it was saved "
               "with a client optimizer); load it with load_optimizer_states=false");
      const std::string saved = m.optimizer.value("type", std::string("?"));
      ZT_CHECK(saved == s_.optimizer->name(), CheckpointError, file, ": the checkpoint's optimizer is ", saved,
               " but this engine's is ", s_.optimizer->name(), "; its states do not carry over. Load with "
               "load_optimizer_states=false to start the optimizer afresh");
    }
    const std::vector<std::string> states = load_optimizer_ ? m.optimizer_states : std::vector<std::string>{};
    const bool sharded = s_.traits().shards_optimizer;
    if (streamed()) {
      plan_streamed(plan, states, sharded);
      return;
    }
    // Fragments go straight into the engine's buffers; an optimizer that has not stepped yet
    // gets its state tensors here.
    for (GroupState& g : s_.groups) {
      at::Tensor& weights = g.stepped_weights();
      std::map<std::string, at::Tensor> group_states;
      for (const auto& name : states) {
        const auto& have = s_.optimizer->state(g.index);
        auto it = have.find(name);
        group_states[name] = it != have.end() && it->second.numel() == weights.numel()
                                 ? it->second
                                 : at::empty({weights.numel()}, weights.options().dtype(at::kFloat));
      }
      for (const auto& piece : checkpoint::held_pieces(g.layout, sharded, plan.world_size(), plan.rank())) {
        const checkpoint::ParamRecord* p = m.find_param(g.param_names[piece.param]);
        // A parameter the checkpoint lacks (load_module_strict false) keeps its weights; its
        // optimizer states start at zero.
        if (p == nullptr) {
          for (auto& [name, t] : group_states) plan.zero_with_reads(t.narrow(0, piece.local_offset, piece.in_param.numel));
          continue;
        }
        plan.read_range(*p, "fp32", piece.in_param.offset, weights.narrow(0, piece.local_offset, piece.in_param.numel));
        for (auto& [name, t] : group_states) {
          plan.read_range(*p, name, piece.in_param.offset, t.narrow(0, piece.local_offset, piece.in_param.numel));
        }
      }
      states_.push_back(std::move(group_states));
      steps_.push_back(saved_steps(m, g));
    }
  }

  void commit_load(const checkpoint::Manifest&) override {
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < s_.groups.size(); ++i) {
      if (!load_optimizer_) continue;
      if (streamed()) {
        s_.optimizer->restore(s_.groups[i].index, steps_[i], {});   // the states are the store's
      } else {
        s_.optimizer->restore(s_.groups[i].index, steps_[i], std::move(states_[i]));
      }
    }
    // Streamed into files: the stage's parameters get the loaded master from there.
    if (streamed()) s_.offload->publish_loaded(s_.groups, *s_.stage);
    s_.stage->publish_weights(s_.groups);
  }

 private:
  // Optimizer states offloaded to files (nvme) and not brought in: a save streams them from
  // the store and a load into it (peak memory: the store's buffers and a piece of a fragment),
  // the weights too, as the store's master.
  bool streamed() const { return s_.offload && s_.offload->on_disk() && !s_.offload->in_memory(); }

  // The step count the checkpoint gives group `g`: its first saved parameter's group's.
  static int64_t saved_steps(const checkpoint::Manifest& m, const GroupState& g) {
    for (const auto& name : g.param_names) {
      if (const auto* p = m.find_param(name)) return std::max<int64_t>(m.groups[static_cast<size_t>(p->group)].optimizer_steps, 0);
    }
    return 0;
  }

  // A load into the offload store's files: each fragment a piece at a time, straight to the
  // store's array at the held piece's place (master for "fp32"; the moments for Adam's states).
  void plan_streamed(checkpoint::LoadPlan& plan, const std::vector<std::string>& states, bool sharded) {
    const checkpoint::Manifest& m = plan.manifest();
    std::vector<std::pair<std::string, int>> arrays{{"fp32", 0}};
    for (const auto& name : states) {
      const int which = name == "exp_avg" ? 1 : name == "exp_avg_sq" ? 2 : -1;
      ZT_CHECK(which > 0, CheckpointError, plan.manifest_file(), ": optimizer state \"", name, "\" is not one of "
               "Adam's (exp_avg, exp_avg_sq), which the offloaded optimizer keeps; load it with "
               "load_optimizer_states=false");
      arrays.emplace_back(name, which);
    }
    offload::OptimizerOffload* store = s_.offload.get();
    for (GroupState& g : s_.groups) {
      for (const auto& piece : checkpoint::held_pieces(g.layout, sharded, plan.world_size(), plan.rank())) {
        const checkpoint::ParamRecord* p = m.find_param(g.param_names[piece.param]);
        for (const auto& [name, which] : arrays) {
          auto sink = [store, group = g.index, which = which, base = piece.local_offset](int64_t i, const float* v,
                                                                                         int64_t n) {
            store->write_state(group, which, base + i, n, v);
          };
          if (p != nullptr) {
            plan.read_range_to(*p, name, piece.in_param.offset, piece.in_param.numel, sink);
          } else if (which > 0) {   // as above: the weights stay, the moments start at zero
            plan.zero_to(piece.in_param.numel, sink);
          }
        }
      }
      steps_.push_back(saved_steps(m, g));
    }
  }

  void add_streamed(checkpoint::RankFileContents& file, const GroupState& g, bool sharded) {
    // The store's arrays, in its order: 0 master, 1 exp_avg, 2 exp_avg_sq (offload is Adam's).
    static constexpr std::array<const char*, 3> kArrays{"fp32", "exp_avg", "exp_avg_sq"};
    offload::OptimizerOffload* store = s_.offload.get();
    for (const auto& piece : checkpoint::saved_pieces(g.layout, sharded, file.world_size(), file.rank())) {
      const Fragment f{file.rank(), piece.in_param.offset, piece.in_param.end()};
      for (int which = 0; which < 3; ++which) {
        file.add_read(checkpoint::fragment_key(kArrays[which], g.param_names[piece.param], f), checkpoint::Dtype::kF32,
                      {f.numel()},
                      [store, group = g.index, which, first = piece.local_offset](int64_t offset, int64_t nbytes, void* dst) {
                        store->read_state(group, which, first + offset / 4, nbytes / 4, static_cast<float*>(dst));
                      });
      }
    }
  }

  std::vector<std::string> state_names() const {
    if (streamed()) return {"exp_avg", "exp_avg_sq"};
    std::vector<std::string> names;
    if (s_.optimizer && !s_.groups.empty()) {
      for (const auto& [name, t] : s_.optimizer->state(s_.groups.front().index)) names.push_back(name);
    }
    return names;
  }

  // The model must be the one saved: names and shapes.
  void check_same_model(const checkpoint::Manifest& m, const std::string& file) const {
    std::vector<std::string> missing, unexpected;
    std::unordered_set<std::string> ours;
    for (const GroupState& g : s_.groups) {
      for (size_t i = 0; i < g.params.size(); ++i) {
        ours.insert(g.param_names[i]);
        const checkpoint::ParamRecord* p = m.find_param(g.param_names[i]);
        if (p == nullptr) {
          missing.push_back(g.param_names[i]);
          continue;
        }
        ZT_CHECK(c10::IntArrayRef(p->shape) == g.params[i].sizes(), CheckpointError, file, ": parameter ", p->name,
                 " has shape ", c10::IntArrayRef(p->shape), " in the checkpoint but ", g.params[i].sizes(),
                 " in the model: the checkpoint is of a different model");
      }
    }
    for (const auto& p : m.params) {
      if (!ours.count(p.name)) unexpected.push_back(p.name);
    }
    ZT_CHECK(!options_.load_module_strict || (missing.empty() && unexpected.empty()), CheckpointError, file,
             ": the checkpoint is of a different model",
             missing.empty() ? std::string() : "; missing from it: " + first_names(missing),
             unexpected.empty() ? std::string() : "; not in the model: " + first_names(unexpected),
             " (load_module_strict=false loads the parameters both have)");
  }

  EngineState& s_;
  const CheckpointLoadOptions& options_;
  bool load_optimizer_ = false;
  std::vector<std::map<std::string, at::Tensor>> states_;   // per group, when optimizer states load
  std::vector<int64_t> steps_;                              // per group
};

}  // namespace

std::unique_ptr<checkpoint::StateProvider> model_states_provider(EngineState& s, const CheckpointLoadOptions& options) {
  return std::make_unique<ModelStates>(s, options);
}

}  // namespace zerotrain::engine::detail
