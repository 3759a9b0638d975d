// Engine::load_checkpoint (docs/checkpoints.md): each rank works out what it holds at this
// world size and stage (checkpoint/fragments.h) and plans which fragments of the saved ranks'
// files overlap it. A checkpoint that is incomplete, of another model or damaged in its
// manifest or headers is refused by every rank before anything changes. The fragments are
// then read straight into the engine's buffers (no second copy of the model states), each
// checked against its checksum.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>

#include <filesystem>
#include <map>
#include <unordered_set>

#include "zerotrain/checkpoint/fragments.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/engine/checkpoint_common.h"
#include "zerotrain/engine/engine.h"
#include "zerotrain/engine/engine_state.h"

namespace zerotrain {
namespace {

namespace fs = std::filesystem;
using checkpoint::Json;
using engine::detail::EngineState;
using engine::detail::GroupState;
using engine::detail::RankStatus;

// A load, planned and checked before anything changes: which tensor of which rank file
// goes where, and the small state (buffers, counters, RNG) already read.
struct Read {
  int rank = 0;
  std::string key;
  at::Tensor dst;         // 1-D fp32: gets the fragment's elements [skip, skip + dst.numel())
  int64_t skip = 0;
  int64_t fragment_numel = 0;
};

struct Plan {
  std::vector<Read> reads;
  std::vector<at::Tensor> zero;                           // state pieces of parameters the checkpoint lacks
  std::vector<std::map<std::string, at::Tensor>> states;  // per group, when optimizer states load
  std::vector<int64_t> steps;                             // per group
  bool load_optimizer = false;
  std::vector<std::pair<at::Tensor, at::Tensor>> wholes;  // (model tensor, its saved value)
  at::Tensor rng;
  std::optional<precision::LossScalerState> scaler;
  std::optional<precision::OverflowWatch::Counts> watch;
  std::optional<int64_t> schedule_iteration;
};

int64_t field(const Json& j, const char* key, const std::string& file) {
  ZT_CHECK(j.is_object() && j.contains(key) && j[key].is_number_integer(), CheckpointError, file,
           ": loss_scaler.", key, " is missing or not an integer");
  return j[key].get<int64_t>();
}

std::string first_names(const std::vector<std::string>& names) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < 5; ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > 5) out += ", ... (" + std::to_string(names.size()) + " in all)";
  return out;
}

// Plans `dst` (1-D fp32) to get elements [lo, lo + dst.numel()) of state `state` of `p`,
// checking that every fragment it needs is in its rank's file with the right size.
void plan_range(checkpoint::CheckpointReader& reader, const checkpoint::ParamRecord& p, const std::string& state,
                int64_t lo, const at::Tensor& dst, Plan& plan) {
  const int64_t hi = lo + dst.numel();
  for (const checkpoint::Fragment& f : p.fragments) {
    if (f.end <= lo || f.begin >= hi) continue;
    Read r{f.rank, checkpoint::fragment_key(state, p.name, f), {}, 0, f.numel()};
    const checkpoint::TensorEntry* e = reader.header(f.rank).find(r.key);
    const std::string file = (reader.dir() / reader.manifest().files[static_cast<size_t>(f.rank)].name).string();
    ZT_CHECK(e != nullptr, CheckpointError, file, ": has no tensor \"", r.key, "\" although the manifest names it");
    ZT_CHECK(e->dtype == checkpoint::Dtype::kF32 && e->nbytes() == f.numel() * 4, CheckpointError, file, ": tensor \"",
             r.key, "\" is not ", f.numel(), " fp32 elements");
    const int64_t a = std::max(lo, f.begin), b = std::min(hi, f.end);
    r.dst = dst.narrow(0, a - lo, b - a);
    r.skip = a - f.begin;
    plan.reads.push_back(std::move(r));
  }
}

void execute(checkpoint::CheckpointReader& reader, const Read& r) {
  const int64_t nbytes = r.fragment_numel * 4;
  // A CPU destination that is the whole fragment gets the file's bytes directly.
  if (r.skip == 0 && r.dst.numel() == r.fragment_numel && r.dst.is_cpu() && r.dst.is_contiguous()) {
    reader.read_tensor(r.rank, r.key, checkpoint::Dtype::kF32, r.dst.data_ptr(), nbytes);
    return;
  }
  // Otherwise the fragment is read into host memory and its part copied into place: on a
  // GPU engine that copy is the upload (blocking, from pageable memory, so `whole` may go
  // when it returns; a load is not a step, and one fragment is in host memory at a time).
  const at::Tensor whole = at::empty({r.fragment_numel}, at::kFloat);
  reader.read_tensor(r.rank, r.key, checkpoint::Dtype::kF32, whole.data_ptr(), nbytes);
  r.dst.copy_(whole.narrow(0, r.skip, r.dst.numel()));
}

at::Tensor read_whole(checkpoint::CheckpointReader& reader, const checkpoint::WholeTensor& w, const std::string& key,
                      const at::Tensor& like, const std::string& file) {
  const auto dtype = checkpoint::dtype_from_tag(w.dtype);
  ZT_CHECK(dtype.has_value(), CheckpointError, file, ": ", key, " has an unknown dtype ", w.dtype);
  ZT_CHECK(c10::IntArrayRef(w.shape) == like.sizes(), CheckpointError, file, ": ", key, " has shape ",
           c10::IntArrayRef(w.shape), " but the model's is ", like.sizes(), " (a different model?)");
  // Read in host memory; commit copies it into the model's tensor, on whatever device.
  at::Tensor t = at::empty(w.shape, engine::detail::scalar_type(*dtype));
  reader.read_tensor(0, key, *dtype, t.data_ptr(), static_cast<int64_t>(t.nbytes()));
  return t;
}

Plan plan_load(EngineState& s, checkpoint::CheckpointReader& reader, const CheckpointLoadOptions& o) {
  const checkpoint::Manifest& m = reader.manifest();
  const std::string file = (reader.dir() / checkpoint::kManifestName).string();
  const int world = s.comm.world_size(), rank = s.comm.rank();
  const bool sharded = s.traits().shards_optimizer;
  Plan st;

  // The model must be the one saved: names and shapes.
  std::vector<std::string> missing, unexpected;
  std::unordered_set<std::string> ours;
  for (const GroupState& g : s.groups) {
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
  ZT_CHECK(!o.load_module_strict || (missing.empty() && unexpected.empty()), CheckpointError, file,
           ": the checkpoint is of a different model",
           missing.empty() ? std::string() : "; missing from it: " + first_names(missing),
           unexpected.empty() ? std::string() : "; not in the model: " + first_names(unexpected),
           " (load_module_strict=false loads the parameters both have)");

  st.load_optimizer = s.optimizer && o.load_optimizer_states && !o.load_module_only;
  if (st.load_optimizer) {
    ZT_CHECK(!m.optimizer.is_null(), CheckpointError, file, ": the checkpoint has no optimizer state (it was saved "
             "with a client optimizer); load it with load_optimizer_states=false");
    const std::string saved = m.optimizer.value("type", std::string("?"));
    ZT_CHECK(saved == s.optimizer->name(), CheckpointError, file, ": the checkpoint's optimizer is ", saved,
             " but this engine's is ", s.optimizer->name(), "; its states do not carry over. Load with "
             "load_optimizer_states=false to start the optimizer afresh");
  }
  const std::vector<std::string> states = st.load_optimizer ? m.optimizer_states : std::vector<std::string>{};

  // Fragments go straight into the engine's buffers; an optimizer that has not stepped yet
  // gets its state tensors here.
  for (GroupState& g : s.groups) {
    at::Tensor& weights = g.stepped_weights();
    std::map<std::string, at::Tensor> group_states;
    for (const auto& name : states) {
      const auto& have = s.optimizer->state(g.index);
      auto it = have.find(name);
      group_states[name] = it != have.end() && it->second.numel() == weights.numel()
                               ? it->second
                               : at::empty({weights.numel()}, weights.options().dtype(at::kFloat));
    }
    int64_t steps = -1;
    for (const auto& piece : checkpoint::held_pieces(g.layout, sharded, world, rank)) {
      const checkpoint::ParamRecord* p = m.find_param(g.param_names[piece.param]);
      // A parameter the checkpoint lacks (load_module_strict false) keeps its weights; its
      // optimizer states start at zero.
      if (p == nullptr) {
        for (auto& [name, t] : group_states) st.zero.push_back(t.narrow(0, piece.local_offset, piece.in_param.numel));
        continue;
      }
      if (steps < 0) steps = m.groups[static_cast<size_t>(p->group)].optimizer_steps;
      plan_range(reader, *p, "fp32", piece.in_param.offset, weights.narrow(0, piece.local_offset, piece.in_param.numel), st);
      for (auto& [name, t] : group_states) {
        plan_range(reader, *p, name, piece.in_param.offset, t.narrow(0, piece.local_offset, piece.in_param.numel), st);
      }
    }
    if (steps < 0) {   // this rank holds none of the group: its step count is the group's anyway
      for (const auto& name : g.param_names) {
        if (const auto* p = m.find_param(name)) {
          steps = m.groups[static_cast<size_t>(p->group)].optimizer_steps;
          break;
        }
      }
    }
    st.states.push_back(std::move(group_states));
    st.steps.push_back(std::max<int64_t>(steps, 0));
  }

  // Buffers and frozen parameters, whole from rank 0's file.
  std::unordered_set<const void*> trained;
  for (const GroupState& g : s.groups) {
    for (const at::Tensor& p : g.params) trained.insert(p.unsafeGetTensorImpl());
  }
  auto whole = [&](const std::vector<checkpoint::WholeTensor>& saved, const std::string& prefix,
                   const std::string& name, const at::Tensor& t) {
    for (const auto& w : saved) {
      if (w.name == name) {
        st.wholes.emplace_back(t, read_whole(reader, w, prefix + name, t, file));
        return;
      }
    }
    ZT_CHECK(!o.load_module_strict, CheckpointError, file, ": ", prefix == "buffer/" ? "buffer " : "frozen parameter ",
             name, " of the model is not in the checkpoint (a different model? load_module_strict=false skips it)");
  };
  for (const auto& item : s.model->named_buffers()) whole(m.buffers, "buffer/", item.key(), item.value());
  for (const auto& item : s.model->named_parameters()) {
    if (trained.insert(item.value().unsafeGetTensorImpl()).second) whole(m.frozen, "frozen/", item.key(), item.value());
  }

  if (o.load_module_only) return st;
  if (m.rng_saved && m.world_size == world) {
    const checkpoint::TensorEntry* e = reader.header(rank).find("rng/cpu");
    ZT_CHECK(e != nullptr && e->dtype == checkpoint::Dtype::kU8, CheckpointError, (reader.dir() / m.files[rank].name).string(),
             ": has no generator state rng/cpu although the manifest says it was saved");
    st.rng = at::empty({e->nbytes()}, at::kByte);
    reader.read_tensor(rank, "rng/cpu", checkpoint::Dtype::kU8, st.rng.data_ptr(), e->nbytes());
  }
  if (s.scaler && m.loss_scaler.is_object()) {
    const Json& j = m.loss_scaler;
    ZT_CHECK(j.contains("scale") && j["scale"].is_number() && j["scale"].get<double>() > 0, CheckpointError, file,
             ": loss_scaler.scale is missing or not a positive number");
    st.scaler = precision::LossScalerState{j["scale"].get<double>(), field(j, "iteration", file),
                                           field(j, "last_overflow_iteration", file), field(j, "hysteresis_left", file)};
    if (s.watch && j.contains("watch")) {
      const Json& w = j["watch"];
      st.watch = precision::OverflowWatch::Counts{field(w, "consecutive_skipped", file), field(w, "steps_at_min_scale", file),
                                                  field(w, "overflows_at_min_scale", file), field(w, "total_skipped", file),
                                                  field(w, "good_steps", file)};
    }
  }
  if (s.schedule && o.load_lr_scheduler_states && m.lr_scheduler.is_object()) {
    ZT_CHECK(m.lr_scheduler.contains("last_batch_iteration") && m.lr_scheduler["last_batch_iteration"].is_number_integer() &&
                 m.lr_scheduler["last_batch_iteration"].get<int64_t>() >= -1,
             CheckpointError, file, ": lr_scheduler.last_batch_iteration is missing or not an integer >= -1");
    st.schedule_iteration = m.lr_scheduler["last_batch_iteration"].get<int64_t>();
  }
  return st;
}

void commit(EngineState& s, Plan& st, const checkpoint::Manifest& m, const CheckpointLoadOptions& o) {
  at::NoGradGuard no_grad;
  for (size_t i = 0; i < s.groups.size(); ++i) {
    if (st.load_optimizer) s.optimizer->restore(s.groups[i].index, st.steps[i], std::move(st.states[i]));
  }
  s.stage->publish_weights(s.groups);
  for (auto& [target, value] : st.wholes) target.copy_(value);
  if (o.load_module_only) return;
  s.global_steps = m.counters.global_steps;
  s.global_samples = m.counters.global_samples;
  s.skipped_steps = m.counters.skipped_steps;
  // Saved at an accumulation boundary: the next micro-step starts an accumulation here too,
  // whatever gradient_accumulation_steps is now.
  s.micro_steps = m.counters.global_steps * s.accumulation_steps;
  s.global_grad_norm.reset();
  if (st.schedule_iteration) {
    s.schedule->set_iteration(*st.schedule_iteration);
    s.apply_schedule();
  }
  if (st.scaler) s.scaler->restore(*st.scaler);
  if (st.watch) s.watch->restore(*st.watch);
  if (st.rng.defined()) {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    gen.set_state(st.rng);
  }
}

}  // namespace

namespace {

std::optional<LoadedCheckpoint> load_into(EngineState& s, const std::string& load_dir, const std::string& tag_in,
                                          const CheckpointLoadOptions& options) {
  std::string tag = tag_in;
  if (tag.empty()) {
    const std::optional<std::string> latest = checkpoint::read_latest_tag(load_dir);
    if (!latest) {
      if (s.comm.rank() == 0) {
        ZT_LOG_WARN("Unable to find latest file at ", (fs::path(load_dir) / checkpoint::kLatestName).string(),
                    "; nothing was loaded. Pass an explicit tag to load a checkpoint without it");
      }
      return std::nullopt;
    }
    tag = *latest;
  }
  ZT_CHECK(checkpoint::valid_tag(tag), UsageError, "checkpoint tag \"", tag, "\" cannot name a tag directory");
  engine::detail::validate_tag(s.comm, tag, s.config.checkpoint.tag_validation);
  const fs::path tag_dir = fs::path(load_dir) / tag;

  const std::string what = "loading checkpoint " + tag_dir.string();
  // Everything is checked before anything changes: the manifest, the model, every rank file's
  // header and every tensor a rank will read.
  std::optional<checkpoint::CheckpointReader> reader;
  Plan plan;
  RankStatus planned;
  try {
    reader.emplace(tag_dir);
    plan = plan_load(s, *reader, options);
  } catch (const std::exception& e) {
    planned.error = e.what();
  }
  engine::detail::throw_if_any_failed(engine::detail::exchange_status(s.comm, planned), what);
  // Then the fragments, each checked against its checksum. One damaged on disk, found now, has
  // left the weights partly overwritten: the engine refuses to train until a load succeeds.
  RankStatus read;
  try {
    at::NoGradGuard no_grad;
    for (const Read& r : plan.reads) execute(*reader, r);
    for (const at::Tensor& t : plan.zero) t.zero_();
  } catch (const std::exception& e) {
    read.error = e.what();
  }
  try {
    engine::detail::throw_if_any_failed(engine::detail::exchange_status(s.comm, read), what);
  } catch (const CheckpointError& e) {
    s.damaged = std::string("the weights were partly overwritten by a load that failed (") + e.what() + ")";
    throw;
  }
  s.damaged.clear();
  const checkpoint::Manifest& m = reader->manifest();
  commit(s, plan, m, options);
  if (s.comm.rank() == 0) {
    ZT_LOG_INFO("loaded checkpoint ", tag_dir.string(), " (saved by ", m.world_size, " rank(s) at ZeRO stage ",
                m.zero_stage, " in ", m.model_dtype, "; now ", s.comm.world_size(), " rank(s), stage ", s.traits().number,
                ", ", dtype_name(s.precision.model), "), global step ", s.global_steps);
  }
  return LoadedCheckpoint{tag_dir.string(), m.client_state};
}

}  // namespace

std::optional<LoadedCheckpoint> Engine::load_checkpoint(const std::string& load_dir, const std::string& tag_in,
                                                        const CheckpointLoadOptions& options) {
  // With optimizer offload the states are read from their store, loaded, and sent back.
  EngineState& s = *state_;
  return s.with_states_in_memory([&] { return load_into(s, load_dir, tag_in, options); });
}

}  // namespace zerotrain
