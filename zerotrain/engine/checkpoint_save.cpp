// Engine::save_checkpoint (docs/checkpoints.md; save_16bit_model is in model_save.cpp). A
// save runs in phases, and after each every rank learns whether every rank succeeded
// (exchange_status), so a failure anywhere stops the save everywhere: (1) the leader makes a
// staging directory ".<tag>.partial"; (2) each rank checks the disk has room and writes its
// file there, fsync'd; (3) the leader writes the manifest, swaps the staging directory into
// place as <tag>, then moves `latest`. Until (3) the previous checkpoint is untouched.
#include <ATen/ATen.h>
#include <ATen/CPUGeneratorImpl.h>
#include <torch/nn/module.h>

#include <fcntl.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <unordered_set>

#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/fragments.h"
#include "zerotrain/checkpoint/locate.h"
#include "zerotrain/checkpoint/manifest.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/checkpoint/writer.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/core/output_path.h"
#include "zerotrain/engine/checkpoint_common.h"
#include "zerotrain/engine/engine.h"
#include "zerotrain/engine/engine_state.h"
#include "zerotrain/version.h"

namespace zerotrain {
namespace {

namespace fs = std::filesystem;
using checkpoint::Fragment;
using checkpoint::Json;
using checkpoint::TensorSource;
using engine::detail::EngineState;
using engine::detail::GroupState;
using engine::detail::RankStatus;
using engine::detail::capture;

std::vector<int64_t> shape_of(const at::Tensor& t) { return {t.sizes().begin(), t.sizes().end()}; }

// This rank's file: its fragments of the master weights and optimizer states, its RNG
// state, and on rank 0 the module's buffers and frozen parameters. `keep` holds tensors the
// sources point into.
std::vector<TensorSource> rank_tensors(EngineState& s, const std::vector<std::string>& state_names,
                                       std::vector<at::Tensor>& keep) {
  const int rank = s.comm.rank(), world = s.comm.world_size();
  const bool sharded = s.traits().shards_optimizer;
  std::vector<TensorSource> out;
  for (GroupState& g : s.groups) {
    const at::Tensor weights = keep.emplace_back(g.stepped_weights().detach().to(at::kCPU).contiguous());
    ZT_INTERNAL_ASSERT(weights.scalar_type() == at::kFloat, "the stepped weights are not fp32");
    std::vector<std::pair<std::string, at::Tensor>> sources{{"fp32", weights}};
    for (const std::string& name : state_names) {
      const auto& st = s.optimizer->state(g.index);
      auto it = st.find(name);
      ZT_INTERNAL_ASSERT(it != st.end(), "optimizer state ", name, " missing in a group");
      sources.emplace_back(name, keep.emplace_back(it->second.detach().to(at::kCPU).contiguous()));
    }
    for (const auto& piece : checkpoint::saved_pieces(g.layout, sharded, world, rank)) {
      const Fragment f{rank, piece.in_param.offset, piece.in_param.end()};
      for (const auto& [state, tensor] : sources) {
        out.push_back({checkpoint::fragment_key(state, g.param_names[piece.param], f), checkpoint::Dtype::kF32,
                       {f.numel()}, tensor.data_ptr<float>() + piece.local_offset});
      }
    }
  }
  at::Tensor rng;
  {
    auto gen = at::detail::getDefaultCPUGenerator();
    std::lock_guard<std::mutex> lock(gen.mutex());
    rng = keep.emplace_back(gen.get_state());
  }
  out.push_back({"rng/cpu", checkpoint::Dtype::kU8, shape_of(rng), rng.data_ptr()});
  if (rank == 0) {
    auto whole = [&](const std::string& key, const at::Tensor& t) {
      const at::Tensor c = keep.emplace_back(t.detach().to(at::kCPU).contiguous());
      out.push_back({key, engine::detail::checkpoint_dtype(c.scalar_type()), shape_of(c), c.data_ptr()});
    };
    for (const auto& item : s.model->named_buffers()) whole("buffer/" + item.key(), item.value());
    std::unordered_set<const void*> trained;
    for (const GroupState& g : s.groups) {
      for (const at::Tensor& p : g.params) trained.insert(p.unsafeGetTensorImpl());
    }
    for (const auto& item : s.model->named_parameters()) {
      if (trained.insert(item.value().unsafeGetTensorImpl()).second) whole("frozen/" + item.key(), item.value());
    }
  }
  return out;
}

checkpoint::WholeTensor whole_record(const std::string& name, const at::Tensor& t) {
  return {name, shape_of(t), std::string(checkpoint::dtype_tag(engine::detail::checkpoint_dtype(t.scalar_type())))};
}

checkpoint::Manifest describe(EngineState& s, const std::string& tag, const Json& client_state,
                              const std::vector<std::string>& state_names, const std::vector<RankStatus>& files) {
  const int world = s.comm.world_size();
  const bool sharded = s.traits().shards_optimizer;
  checkpoint::Manifest m;
  m.tag = tag;
  m.zerotrain_version = ZEROTRAIN_VERSION;
  m.world_size = world;
  m.zero_stage = s.traits().number;
  m.model_dtype = dtype_name(s.precision.model);
  m.counters = {s.global_steps, s.global_samples, s.skipped_steps, s.micro_steps};
  const Json config = s.config.to_json();
  if (s.optimizer) {
    m.optimizer = {{"type", s.optimizer->name()}, {"params", config.contains("optimizer") ? config["optimizer"].value("params", Json::object()) : Json::object()}};
    m.optimizer_states = state_names;
  }
  if (s.schedule) {
    m.lr_scheduler = {{"type", s.config.scheduler->type}, {"last_batch_iteration", s.schedule->iteration()}};
  }
  if (s.scaler) {
    const auto st = s.scaler->state();
    m.loss_scaler = {{"scale", st.scale}, {"iteration", st.iteration},
                     {"last_overflow_iteration", st.last_overflow_iteration}, {"hysteresis_left", st.hysteresis_left}};
    if (s.watch) {
      const auto c = s.watch->counts();
      m.loss_scaler["watch"] = {{"consecutive_skipped", c.consecutive_skipped}, {"steps_at_min_scale", c.steps_at_min_scale},
                                {"overflows_at_min_scale", c.overflows_at_min_scale}, {"total_skipped", c.total_skipped},
                                {"good_steps", c.good_steps}};
    }
  }
  m.rng_saved = true;
  for (const GroupState& g : s.groups) {
    m.groups.push_back({g.name, g.hyper.lr, g.hyper.weight_decay, s.optimizer ? s.optimizer->steps(g.index) : 0});
    std::vector<std::vector<Fragment>> fragments(g.params.size());
    for (int r = 0; r < world; ++r) {
      for (const auto& piece : checkpoint::saved_pieces(g.layout, sharded, world, r)) {
        fragments[piece.param].push_back({r, piece.in_param.offset, piece.in_param.end()});
      }
    }
    for (size_t i = 0; i < g.params.size(); ++i) {
      std::sort(fragments[i].begin(), fragments[i].end(), [](const Fragment& a, const Fragment& b) { return a.begin < b.begin; });
      m.params.push_back({g.param_names[i], shape_of(g.params[i]), dtype_name(g.params[i].scalar_type()),
                          static_cast<int>(g.index), std::move(fragments[i])});
    }
  }
  for (const auto& item : s.model->named_buffers()) m.buffers.push_back(whole_record(item.key(), item.value()));
  std::unordered_set<const void*> trained;
  for (const GroupState& g : s.groups) {
    for (const at::Tensor& p : g.params) trained.insert(p.unsafeGetTensorImpl());
  }
  for (const auto& item : s.model->named_parameters()) {
    if (trained.insert(item.value().unsafeGetTensorImpl()).second) m.frozen.push_back(whole_record(item.key(), item.value()));
  }
  for (int r = 0; r < world; ++r) {
    m.files.push_back({r, checkpoint::rank_file_name(r), files[r].values[0], static_cast<uint64_t>(files[r].values[1]),
                       static_cast<uint64_t>(files[r].values[2])});
  }
  m.ds_config = config;
  m.client_state = client_state;
  return m;
}

// `staging` becomes `final_dir`; an existing `final_dir` (a tag saved again) is replaced in
// one step where the file system can exchange directories.
void publish(const fs::path& staging, const fs::path& final_dir) {
  std::error_code ec;
  if (!fs::exists(final_dir, ec)) {
    fs::rename(staging, final_dir);
  } else if (::renameat2(AT_FDCWD, staging.c_str(), AT_FDCWD, final_dir.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(staging);
  } else {
    const fs::path old = final_dir.parent_path() / ("." + final_dir.filename().string() + ".old");
    fs::remove_all(old);
    fs::rename(final_dir, old);
    fs::rename(staging, final_dir);
    fs::remove_all(old);
  }
  checkpoint::fsync_directory(final_dir.parent_path());
}

}  // namespace

void Engine::save_checkpoint(const std::string& save_dir, const std::string& tag_in, const Json& client_state,
                             bool save_latest) {
  EngineState& s = *state_;
  const auto started = std::chrono::steady_clock::now();
  s.check_not_damaged();
  ZT_CHECK(s.micro_steps % s.accumulation_steps == 0, UsageError, "save_checkpoint at micro-step ", s.micro_steps,
           ", inside a gradient accumulation of ", s.accumulation_steps,
           " micro-steps: the gradients accumulated since the last step would be lost. Save after the step() that "
           "ends the accumulation (is_gradient_accumulation_boundary() before it)");
  const std::string tag = tag_in.empty() ? "global_step" + std::to_string(s.global_steps) : tag_in;
  ZT_CHECK(checkpoint::valid_tag(tag), UsageError, "checkpoint tag \"", tag,
           "\" cannot name a directory: use printable characters without '/', not starting with '.'");
  engine::detail::validate_tag(s.comm, tag, s.config.checkpoint.tag_validation);
  const fs::path dir(save_dir), final_dir = dir / tag, staging = dir / ("." + tag + ".partial");
  const bool leader = checkpoint::leads_save_directory(s.config.checkpoint.use_node_local_storage, s.comm.rank());
  const std::string what = "saving checkpoint " + final_dir.string();

  RankStatus made;
  if (leader) {
    made.error = capture([&] {
      // The tag's folder and `latest` are zerotrain's own (core/output_path.h): a link or a
      // file where the tag goes, or a link, a FIFO or a folder named `latest`, is refused
      // before anything is written, not followed or replaced.
      files::check_own_directory(final_dir, "checkpoint tag folder");
      if (save_latest) files::check_output_file(dir / checkpoint::kLatestName, {.what = "checkpoint `latest` file"});
      try {
        fs::create_directories(dir);
        fs::remove_all(staging);
        fs::create_directory(staging);
      } catch (const fs::filesystem_error& e) {
        throw IoError("cannot create the staging directory " + staging.string() + ": " +
                      checkpoint::write_error_cause(e.code().value()) + "; the previous checkpoint is untouched");
      }
    });
  }
  engine::detail::throw_if_any_failed(engine::detail::exchange_status(s.comm, made), what);
  // After each later phase: if any rank failed, the staging directory goes and every rank throws.
  auto settle = [&](const std::vector<RankStatus>& statuses) {
    const bool failed = std::any_of(statuses.begin(), statuses.end(), [](const RankStatus& r) { return !r.error.empty(); });
    if (failed && leader) {
      std::error_code ec;
      fs::remove_all(staging, ec);
    }
    engine::detail::throw_if_any_failed(statuses, what);
  };

  if (s.client_optimizer && s.comm.rank() == 0) {
    ZT_LOG_WARN("save_checkpoint: the state of a client optimizer is not saved (only the weights, the schedule and "
                "the counters); resume with load_optimizer_states=false or configure the optimizer in the config");
  }
  std::vector<std::string> state_names;
  std::vector<at::Tensor> keep;   // holds the states the file points into, offloaded or not
  checkpoint::PreparedFile file;
  RankStatus sized;
  sized.error = capture([&] {
    s.with_states_in_memory([&] {
      if (s.optimizer && !s.groups.empty()) {
        for (const auto& [name, t] : s.optimizer->state(s.groups.front().index)) state_names.push_back(name);
      }
      file = checkpoint::prepare_safetensors(rank_tensors(s, state_names, keep), {{"format", "zerotrain-rank-file"}}, true);
    });
    sized.values[0] = file.bytes();
  });
  const auto sizes = engine::detail::exchange_status(s.comm, sized);
  settle(sizes);
  // Every rank checks for room before any rank writes (a rank checking later would see the
  // others' bytes already used). The leader also counts the manifest and `latest`: the
  // manifest's size is known now, its checksums being fixed-width hex.
  int64_t total = 0;
  for (const auto& r : sizes) total += r.values[0];
  RankStatus room;
  room.error = capture([&] {
    const int64_t own = leader ? static_cast<int64_t>(
                                     checkpoint::manifest_to_json(describe(s, tag, client_state, state_names, sizes))
                                         .dump(1)
                                         .size() +
                                     tag.size())
                               : 0;
    checkpoint::check_room(staging, total + own, file.bytes());
  });
  settle(engine::detail::exchange_status(s.comm, room));

  RankStatus wrote;
  wrote.error = capture([&] {
    const checkpoint::WrittenFile w = write_safetensors(staging / checkpoint::rank_file_name(s.comm.rank()), file);
    wrote.values = {w.bytes, static_cast<int64_t>(w.checksum), static_cast<int64_t>(w.header_checksum)};
  });
  keep.clear();
  const auto files = engine::detail::exchange_status(s.comm, wrote);
  settle(files);

  RankStatus published;
  if (leader) {
    published.error = capture([&] {
      const checkpoint::Manifest m = describe(s, tag, client_state, state_names, files);
      checkpoint::AtomicFile manifest(staging / checkpoint::kManifestName);
      manifest.write(checkpoint::manifest_to_json(m).dump(1));
      manifest.commit();
      publish(staging, final_dir);
      if (save_latest) {
        checkpoint::AtomicFile latest(dir / checkpoint::kLatestName);
        latest.write(tag);
        latest.commit();
      }
    });
  }
  settle(engine::detail::exchange_status(s.comm, published));
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (s.comm.rank() == 0) {
    ZT_LOG_INFO("saved checkpoint ", final_dir.string(), ": ", s.comm.world_size(), " rank file(s), ",
                static_cast<double>(total) / (1 << 20), " MiB in ", seconds, " s");
  }
}

}  // namespace zerotrain
