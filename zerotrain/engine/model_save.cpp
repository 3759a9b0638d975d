// Engine::save_16bit_model: the model in its training dtype as Hugging Face's model folder
// writes it (docs/python.md, "Saving the model"). It streams: the tensors go in the shard
// plan's order, and at stage 3 every rank gathers the parameters of one module at a time
// while rank 0 writes their bytes into the open file and lets them go; so no rank holds more
// than one module's parameters beyond its shard (consolidated_16bit_state_dict, which keeps
// every copy on rank 0, is not used). Phases agree over all ranks as the checkpoint save
// does: (1) rank 0 plans the files, checks the disk and opens the first one; (2) the
// tensors stream; (3) rank 0 writes the caller's other files (config.json) and the index.
// A failure on rank 0 still takes part in every later gather, so no rank is left waiting,
// and throws on every rank at the end.
#include <ATen/ATen.h>
#include <torch/nn/module.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <unordered_set>

#include "zerotrain/checkpoint/file_io.h"
#include "zerotrain/checkpoint/reader.h"
#include "zerotrain/checkpoint/sharded_writer.h"
#include "zerotrain/core/error.h"
#include "zerotrain/core/logging.h"
#include "zerotrain/checkpoint/protocol/agreement.h"
#include "zerotrain/checkpoint/protocol/tensor_dtype.h"
#include "zerotrain/engine/engine.h"
#include "zerotrain/engine/engine_state.h"

namespace zerotrain {
namespace {

namespace fs = std::filesystem;
using engine::detail::EngineState;
using checkpoint::RankStatus;

struct ModelTensor {
  std::string name;
  at::Tensor tensor;
  bool sharded = false;   // a trained parameter at stage 3: gathered before it is read
  std::string saved_name;   // the name in the file, when the caller maps names
  const std::string& file_name() const { return saved_name.empty() ? name : saved_name; }
};

// What Hugging Face's save_pretrained writes: every parameter once, under the first name
// the model registers it by (a head tied to its embedding is the embedding: GPT-2's
// `transformer.wte.weight`, not `lm_head.weight`), then the buffers the model registers,
// which are the persistent ones (the Python mirror leaves the others out, as state_dict()
// does).
std::vector<ModelTensor> model_tensors(EngineState& s, bool exclude_frozen,
                                       const std::function<std::string(const std::string&)>& rename) {
  std::unordered_set<const void*> trained;
  for (const auto& g : s.groups) {
    for (const at::Tensor& p : g.params) trained.insert(p.unsafeGetTensorImpl());
  }
  const bool shards = s.traits().shards_parameters;
  std::vector<ModelTensor> out;
  std::unordered_set<const void*> seen;
  for (const auto& item : s.model->named_parameters()) {
    const void* impl = item.value().unsafeGetTensorImpl();
    if (!seen.insert(impl).second) continue;
    const bool is_trained = trained.count(impl) > 0;
    if (exclude_frozen && !is_trained) continue;
    out.push_back({item.key(), item.value(), shards && is_trained});
  }
  for (const auto& item : s.model->named_buffers()) {
    if (seen.insert(item.value().unsafeGetTensorImpl()).second) out.push_back({item.key(), item.value(), false});
  }
  if (rename) {
    for (ModelTensor& t : out) t.saved_name = rename(t.name);
  }
  return out;
}

// The module a parameter is registered on: "h.0.attn.weight" -> "h.0.attn".
std::string_view module_of(std::string_view name) {
  const size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? std::string_view() : name.substr(0, dot);
}

void write_tensor(checkpoint::ShardedWriter& writer, const at::Tensor& t) {
  at::Tensor host = t.detach();
  if (!host.is_cpu()) host = host.to(at::kCPU);
  host = host.contiguous();
  writer.write(host.data_ptr(), static_cast<int64_t>(host.nbytes()));
}

}  // namespace

bool Engine::save_16bit_model(const std::string& save_dir, const std::string& filename,
                              const ModelSaveOptions& options) {
  EngineState& s = *state_;
  const auto started = std::chrono::steady_clock::now();
  ZT_CHECK(checkpoint::valid_tag(filename) && filename.size() > 12 &&
               filename.compare(filename.size() - 12, 12, ".safetensors") == 0,
           UsageError, "save_16bit_model: \"", filename,
           "\" should be a plain file name ending in .safetensors (zerotrain writes safetensors, never pickles)");
  ZT_CHECK(options.max_shard_bytes >= 1, UsageError, "save_16bit_model: the largest shard must be at least 1 byte, got ",
           options.max_shard_bytes, "; give a size such as 5GB (the default)");
  if (s.traits().shards_parameters && !s.config.zero_optimization.gather_16bit_weights_on_model_save &&
      !options.gather_at_stage3) {
    if (s.comm.rank() == 0) {
      ZT_LOG_WARN("Did not save the model ", (fs::path(save_dir) / filename).string(),
                  " because \"stage3_gather_16bit_weights_on_model_save\" is false; set it to true, or consolidate "
                  "a checkpoint with `zerotrain zero-to-fp32`");
    }
    return false;
  }
  s.check_not_damaged();
  const bool writes = s.comm.rank() == 0;
  const std::vector<ModelTensor> tensors = model_tensors(s, options.exclude_frozen_parameters, options.tensor_name);

  // Every rank plans (the shapes are whole everywhere), so all gather in the same order.
  std::optional<checkpoint::ShardedWriter> writer;
  RankStatus opened;
  std::vector<size_t> order;
  opened.error = checkpoint::capture([&] {
    std::vector<checkpoint::OutputTensor> planned;
    for (const ModelTensor& t : tensors) {
      planned.push_back({t.file_name(), checkpoint::checkpoint_dtype(t.tensor.scalar_type()),
                         {t.tensor.sizes().begin(), t.tensor.sizes().end()}});
    }
    checkpoint::ShardPlan plan = checkpoint::plan_shards(std::move(planned), options.max_shard_bytes, filename);
    order = plan.write_order();
    if (!writes) return;
    ZT_CHECK(options.caller_error.empty(), IoError, options.caller_error);
    for (const auto& [name, text] : options.extra_files) {
      ZT_CHECK(checkpoint::valid_tag(name) && !checkpoint::is_output_file(name, filename), UsageError,
               "save_16bit_model: \"", name, "\" cannot name a file of the model folder besides the weights");
    }
    writer.emplace(save_dir, std::move(plan), checkpoint::RoomFor{"the 16-bit model", ""});
  });
  checkpoint::throw_if_any_failed(checkpoint::exchange_status(s.comm, opened), "save_16bit_model");

  // The tensors, in the plan's order; at stage 3 the parameters of one module at a time
  // (DeepSpeed gathers module by module too), on every rank.
  RankStatus wrote;
  for (size_t k = 0; k < order.size();) {
    size_t end = k + 1;
    const ModelTensor& first = tensors[order[k]];
    if (first.sharded) {
      while (end < order.size() && tensors[order[end]].sharded &&
             module_of(tensors[order[end]].name) == module_of(first.name)) {
        ++end;
      }
    } else if (!writes) {
      k = end;
      continue;
    }
    std::optional<GatheredParameters> full;
    if (first.sharded) {
      std::vector<at::Tensor> params;
      for (size_t j = k; j < end; ++j) params.push_back(tensors[order[j]].tensor);
      full.emplace(*this, std::move(params));
    }
    if (writes && wrote.error.empty()) {
      wrote.error = checkpoint::capture([&] {
        for (size_t j = k; j < end; ++j) write_tensor(*writer, tensors[order[j]].tensor);
      });
    }
    if (full) full->close();
    k = end;
  }
  int64_t files = 0, bytes = 0;
  if (writes && wrote.error.empty()) {
    wrote.error = checkpoint::capture([&] {
      for (const auto& [name, text] : options.extra_files) {
        checkpoint::AtomicFile file(fs::path(save_dir) / name);
        file.write(text);
        file.commit();
      }
      const checkpoint::ShardedOutput out = writer->finish();
      files = static_cast<int64_t>(out.files.size());
      bytes = out.bytes_written;
    });
  }
  writer.reset();   // unfinished: what it wrote goes
  checkpoint::throw_if_any_failed(checkpoint::exchange_status(s.comm, wrote), "save_16bit_model");
  if (writes) {
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    ZT_LOG_INFO("saved the ", dtype_name(s.precision.model), " model into ", save_dir, ": ", files, " file(s), ",
                static_cast<double>(bytes) / (1 << 20), " MiB in ", seconds, " s");
  }
  return true;
}

}  // namespace zerotrain
