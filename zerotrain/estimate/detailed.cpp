#include "zerotrain/estimate/detailed.h"

#include <fmt/format.h>

#include <algorithm>
#include <numeric>

#include "zerotrain/core/error.h"
#include "zerotrain/estimate/offload_bytes.h"
#include "zerotrain/partition/layout.h"
#include "zerotrain/stages/plan.h"
#include "zerotrain/stages/unit_plan.h"
#include "zerotrain/stages/unit_schedule.h"

namespace zerotrain::estimate {
namespace {

constexpr int64_t kFp32 = 4;
constexpr int64_t kAdamBytes = 8;   // exp_avg and exp_avg_sq, fp32

int64_t bytes_of(Precision p) { return p == Precision::kFp32 ? 4 : 2; }

// The engine's defaults (engine/mixed_precision.cpp): gradients accumulate in the training
// dtype, except bf16 at stage 0 (fp32); they travel in the training dtype.
int64_t accum_bytes(const Setup& s) {
  if (s.precision == Precision::kBf16 && !config::traits_of(s.stage).shards_optimizer) return kFp32;
  return bytes_of(s.precision);
}

// The conversion bytes alive at once while stages 0-1 reduce buckets accumulated in another
// dtype (engine/grad_sync.cpp): each lives from its launch until its reduction is finished;
// with overlap_comm two reductions stay in flight while the next bucket fills.
int64_t staging_peak(const partition::GroupLayout& layout, int64_t element_bytes, bool overlap) {
  const size_t window = stages::staging_buffers_kept(overlap);
  const auto& buckets = layout.buckets();
  int64_t peak = 0;
  for (size_t b = 0; b < buckets.size(); ++b) {
    int64_t alive = 0;
    for (size_t k = b + 1 >= window ? b + 1 - window : 0; k <= b; ++k) alive += buckets[k].flat.numel * element_bytes;
    peak = std::max(peak, alive);
  }
  return peak;
}

// The group's layout as the engine builds it: buckets by size, or at stage 3 one per unit.
struct RankLayout {
  partition::GroupLayout layout;
  int64_t resident_numel = 0;
  int64_t gathered_numel = 0;   // stage 3: unit parameters alive at once
};

RankLayout layout_of(const ModelShape& model, const Setup& s, const config::StageTraits& stage, int rank) {
  if (!stage.shards_parameters) {
    return {partition::GroupLayout(model.param_numels, std::max<int64_t>(1, s.reduce_bucket_size), s.world_size, rank)};
  }
  // A model known by its counts only (--params) is taken as DeepSpeed's estimator takes it:
  // all sharded, its largest layer gathered at a time.
  const bool counts_only = model.param_units.empty();
  std::vector<int> units = model.param_units;
  units.resize(model.param_numels.size(), counts_only ? 1 : 0);
  stages::apply_persistence(model.param_numels, units, {s.param_persistence_threshold, s.model_persistence_threshold});
  stages::UnitArrangement a = stages::arrange_units(model.param_numels, units, s.world_size, rank);
  RankLayout r{a.layout};
  std::vector<int64_t> unit_numels{0};   // by unit, in unit order (buckets run the other way)
  for (size_t b = a.layout.buckets().size(); b-- > 0;) {
    const int64_t n = a.layout.buckets()[b].flat.numel;
    if (a.unit_of_bucket[b] == 0) {
      r.resident_numel += n;
    } else {
      unit_numels.push_back(n);
    }
  }
  if (counts_only) {
    r.gathered_numel = model.largest_layer_params;
    return r;
  }
  // The stage's own schedule over a micro-step that enters the units in order and leaves
  // them in reverse (sharing between units is not modelled).
  std::vector<std::vector<int>> events;
  const int unit_count = static_cast<int>(unit_numels.size()) - 1;
  for (int u = 1; u <= unit_count; ++u) events.push_back({u});
  for (int u = unit_count; u >= 1; --u) events.push_back({u});
  const stages::UnitSchedule schedule(std::move(events), std::move(unit_numels),
                                      {s.prefetch_bucket_size, s.max_live_parameters, s.max_reuse_distance});
  r.gathered_numel = stages::simulate_gathered_peak(schedule, static_cast<std::size_t>(unit_count));
  return r;
}

Breakdown rank_states(const ModelShape& model, const Setup& s, int rank) {
  const config::StageTraits stage = config::traits_of(s.stage);
  const RankLayout rl = layout_of(model, s, stage, rank);
  const partition::GroupLayout& layout = rl.layout;
  const int64_t p = bytes_of(s.precision), a = accum_bytes(s), c = bytes_of(s.precision);
  const bool half = s.precision != Precision::kFp32;
  const int64_t shard = layout.shard_numel();
  const bool optimizer_offloaded = s.offload_optimizer != Offload::kNone;
  const bool params_on_disk = s.offload_param == Offload::kNvme && stage.shards_parameters;
  // The engine's own plan of its buffers (stages/plan.h), counted in bytes; offload then
  // moves some of them (docs/offload.md).
  const stages::GroupPlan plan = stages::plan_group(stage, layout, {half, a == kFp32, a == c}, rl.resident_numel);
  Breakdown b;
  int64_t params_numel = plan.params_numel;
  if (params_on_disk) {
    params_numel = rl.resident_numel;   // the shard is in the swap file; gathers read it into their own buffers
  } else if (stage.shards_parameters && !half && optimizer_offloaded) {
    params_numel += shard;   // in fp32 the shard was the master; the offload store keeps a master of its own
  }
  b.params = params_numel * p;
  b.gathered = rl.gathered_numel * p;   // a unit is gathered whole while it computes, with those prefetched or kept
  b.grads = (plan.grad_full_numel + plan.grad_shard_numel) * a;   // the gradient shard stays in memory, offload or not
  // Buckets: staged in the communication dtype by a stage that keeps no full gradients
  // (in buffers it keeps across steps, stages/staging_pool.h: they coexist with the step's
  // own), or, for a moment, when they accumulate in another dtype than they travel in.
  std::vector<int64_t> bucket_numels;
  for (const auto& bucket : layout.buckets()) bucket_numels.push_back(bucket.flat.numel);
  const int64_t kept = plan.stages_every_bucket ? stages::simulate_staging_peak(bucket_numels, s.overlap_comm) * c : 0;
  const int64_t staging = !plan.stages_every_bucket && a != c ? staging_peak(layout, c, s.overlap_comm) : 0;
  switch (s.offload_optimizer) {
    case Offload::kNone: {
      b.master = plan.master_numel * kFp32;
      b.optimizer = plan.optimizer_numel * kAdamBytes;
      // The step converts 16-bit gradients to fp32 once (engine.cpp unscaled_fp32_gradients).
      b.buffers = kept + std::max(staging, plan.step_copy_numel * kFp32);
      break;
    }
    case Offload::kCpu: {
      // The store's master shard and moments, in host memory. The fused step reads the
      // gradients in their own dtype: no fp32 copy.
      b.master = shard * kFp32;
      b.optimizer = shard * kAdamBytes;
      b.buffers = kept + staging;
      b.host += b.master + b.optimizer;
      break;
    }
    case Offload::kNvme: {
      // Master and moments in swap files; a few sub-groups of them in memory at a time.
      const int64_t sub_group = sub_group_numel(s.sub_group_size, shard);
      const int64_t swap_buffers = nvme_optimizer_buffer_bytes({s.buffer_count, s.pipeline_read, s.pipeline_write}, sub_group);
      b.buffers = kept + staging + swap_buffers;
      b.host += swap_buffers;
      b.disk += nvme_optimizer_disk_bytes(shard, sub_group);
      break;
    }
  }
  if (s.async_save) {
    // The engine saves each rank's share of the fp32 weights with their moments (at stage
    // 0 too: the ranks split the file between them), and copies it for the background write.
    b.snapshot = shard * (kFp32 + kAdamBytes);
    b.host += b.snapshot;
  }
  if (params_on_disk) b.disk += nvme_param_disk_bytes(layout, p);
  if (s.offload_param == Offload::kCpu && stage.shards_parameters) b.host += shard * p;
  return b;
}

// A language model's tokens per sample, and per micro-batch.
int64_t sequence(const ModelShape& model, const Setup& s) { return s.seq_len > 0 ? s.seq_len : *model.block_size(); }
int64_t tokens(const ModelShape& model, const Setup& s) { return s.micro_batch * sequence(model, s); }

// A decoder's norm, per token: RMSNorm keeps its input in fp32 (the input itself in fp32, a
// copy in 16 bits), the normalised values in the model's dtype, its output (the next
// linears' input) and the fp32 rsqrt; LayerNorm its input, its output and the fp32 mean and
// rstd.
int64_t decoder_norm_bytes_per_token(const DecoderDims& d, int64_t e) {
  return d.norm == DecoderDims::Norm::kRmsNorm ? d.hidden * (kFp32 + 2 * e) + kFp32 : 2 * d.hidden * e + 2 * kFp32;
}

// A decoder from a Hugging Face folder (models/hf/families/gpt2.cpp, llama.cpp): what
// autograd keeps per token of one block, as the allocator counts it on CPU, where LibTorch's
// scaled_dot_product_attention runs its flash kernel: it keeps its output and an fp32
// logsumexp per head, never the probabilities.
int64_t decoder_block_bytes_per_token(const DecoderDims& d, int64_t e) {
  const int64_t norm = decoder_norm_bytes_per_token(d, e);
  // Attention: q, k and v at n_head heads each (Llama: the rotated q, k and v repeated to
  // n_head heads; GPT-2: the fused qkv output they view), the output (which the output
  // projection takes as it is), and the kernel's logsumexp.
  const int64_t attention = 4 * d.n_head * d.head_dim * e + d.n_head * kFp32;
  return 2 * norm + attention + d.mlp_saved * d.intermediate * e;
}

}  // namespace

const char* to_string(Offload offload) {
  switch (offload) {
    case Offload::kCpu: return "cpu";
    case Offload::kNvme: return "nvme";
    case Offload::kNone: break;
  }
  return "none";
}

const char* to_string(Precision precision) {
  switch (precision) {
    case Precision::kBf16: return "bf16";
    case Precision::kFp16: return "fp16";
    case Precision::kFp32: break;
  }
  return "fp32";
}

int64_t ModelShape::total_params() const { return std::accumulate(param_numels.begin(), param_numels.end(), int64_t{0}); }

std::optional<int64_t> ModelShape::block_size() const {
  if (gpt) return gpt->block_size;
  if (decoder) return decoder->block_size;
  return std::nullopt;
}

int64_t activation_bytes(const ModelShape& model, const Setup& s) {
  const int64_t e = bytes_of(s.precision);
  if (model.gpt) {
    // What autograd keeps per token of each block (models.cpp's Block): the inputs of ln1,
    // qkv, proj, ln2, fc, the gelu and out (1 + 1 + 1 + 1 + 1 + 4 + 4 widths), the qkv output
    // that q, k and v view (3), the softmax output (n_head x seq), and the two layer norms'
    // fp32 mean and rstd.
    const GptDims& g = *model.gpt;
    const int64_t n = tokens(model, s), t = s.seq_len > 0 ? s.seq_len : g.block_size;
    const int64_t block = n * (16 * g.n_embd * e + g.n_head * t * e + 4 * kFp32);
    // ln_f's and head's inputs, and the fp32 log-softmax cross-entropy keeps.
    const int64_t top = n * (2 * g.n_embd * e + kFp32 * 2 + g.vocab_size * kFp32);
    // Checkpointed (zerotrain/activation, one segment per block): the forward keeps each
    // block's input, and backward recomputes one block at a time, so the high-water mark is
    // the inputs plus one block. tests/unit/activation_checkpoint_test.cpp measures both rows.
    const int64_t kept = s.activation_checkpointing ? g.n_layer * n * g.n_embd * e + block : g.n_layer * block;
    return kept + top;
  }
  if (model.decoder) {
    const DecoderDims& d = *model.decoder;
    const int64_t n = tokens(model, s), t = sequence(model, s);
    int64_t block = n * decoder_block_bytes_per_token(d, e);
    // Mistral's explicit mask: the attention converts it to the model's dtype and keeps it.
    if (d.sliding_window > 0 && t > d.sliding_window) block += t * t * e;
    // The final norm (its input, and its output, the head's input), and the fp32
    // log-softmax cross-entropy keeps (the logits are cast to fp32 first).
    const int64_t top = n * (decoder_norm_bytes_per_token(d, e) + d.vocab_size * kFp32);
    // Checkpointed: as the built-in GPT, each block's input and one recomputed block.
    // tests/unit/hf_activation_memory_test.cpp measures both rows.
    const int64_t kept = s.activation_checkpointing ? d.n_layer * n * d.hidden * e + block : d.n_layer * block;
    return kept + top;
  }
  if (model.mlp) {
    const MlpDims& m = *model.mlp;
    return s.micro_batch * ((m.n_in + m.n_layer * m.n_hidden) * e + 2 * m.n_out * kFp32);
  }
  return 0;
}

Breakdown estimate(const ModelShape& model, const Setup& s) {
  ZT_CHECK(s.world_size >= 1, UsageError, "--world_size must be at least 1");
  ZT_CHECK(s.micro_batch >= 1, UsageError, "--micro_batch must be at least 1");
  ZT_CHECK(s.reduce_bucket_size >= 1, UsageError, "--reduce_bucket_size must be at least 1 element");
  ZT_CHECK(s.seq_len >= 0, UsageError, "--seq_len must be positive");
  ZT_CHECK(!model.gpt || s.seq_len <= model.gpt->block_size, UsageError, "--seq_len ", s.seq_len,
           " is longer than the model's block_size ", model.gpt ? model.gpt->block_size : 0,
           " (its position embedding has no more rows); raise block_size in --model_config");
  // A folder's model trains at the block_size its --model_config names, and its data is cut
  // into blocks of that length: a longer sequence never reaches it.
  ZT_CHECK(!model.decoder || s.seq_len <= model.decoder->block_size, UsageError, "--seq_len ", s.seq_len,
           " is longer than the model's block_size ", model.decoder ? model.decoder->block_size : 0,
           " (the sequence it trains at); raise it with --model_config block_size=N, up to config.json's "
           "max_position_embeddings (n_positions for GPT-2)");
  ZT_CHECK(model.block_size() || s.seq_len == 0, UsageError, "--seq_len applies to language models only (gpt, hf:DIR)");
  const config::StageTraits stage = config::traits_of(s.stage);
  ZT_CHECK(s.offload_param == Offload::kNone || stage.shards_parameters, UsageError,
           "parameter offload needs ZeRO stage 3");
  ZT_CHECK(s.offload_optimizer == Offload::kNone || stage.shards_optimizer, UsageError,
           "optimizer offload needs ZeRO stage 1, 2 or 3");
  ZT_CHECK(s.buffer_count >= 0, UsageError, "--buffer_count must not be negative");
  // The rank holding the most (chunks of uneven buckets differ by an element or so).
  Breakdown worst;
  for (int r = 0; r < s.world_size; ++r) {
    Breakdown b = rank_states(model, s, r);
    if (b.model_states() > worst.model_states()) worst = b;
    if (s.world_size > 64) break;   // the ranks differ by a few elements: rank 0 stands for all
  }
  worst.activations = activation_bytes(model, s);
  // During backward: the loss's fp32 gradient and its log-softmax gradient (GPT, decoder), the
  // largest parameter gradient before the engine moves it into its buffers, and the
  // gradients of activations that backward holds while it frees the activations themselves,
  // with the freed blocks the allocator keeps: 0.6 x the activations, fitted on the runs of
  // docs/estimator.md (the only fitted number here).
  const int64_t largest = model.param_numels.empty()
                              ? 0
                              : *std::max_element(model.param_numels.begin(), model.param_numels.end());
  worst.backward_transient = largest * bytes_of(s.precision) + worst.activations * 6 / 10;
  if (model.gpt) worst.backward_transient += tokens(model, s) * model.gpt->vocab_size * 2 * kFp32;
  if (model.decoder) worst.backward_transient += tokens(model, s) * model.decoder->vocab_size * 2 * kFp32;
  worst.runtime = s.runtime_bytes;
  return worst;
}

namespace {

std::string mib(int64_t bytes) { return fmt::format("{:.1f}", static_cast<double>(bytes) / (1 << 20)); }

std::string options_of(const Setup& s) {
  std::string o = fmt::format("stage {}", s.stage);
  if (s.offload_optimizer != Offload::kNone) o += fmt::format(", offload_optimizer={}", to_string(s.offload_optimizer));
  if (s.offload_param != Offload::kNone) o += fmt::format(", offload_param={}", to_string(s.offload_param));
  return o;
}

Setup with_offload(const Setup& base, int stage, Offload optimizer, Offload param) {
  Setup s = base;
  s.stage = stage;
  s.offload_optimizer = optimizer;
  s.offload_param = param;
  return s;
}

// The guide's order, fastest first: stage 0 (DDP) > 1 > 2 > 2 + optimizer offload > 3 >
// 3 + parameter offload > 3 + parameter and optimizer offload, all to host memory.
std::vector<Setup> fastest_first(const Setup& base) {
  constexpr Offload kNone = Offload::kNone, kCpu = Offload::kCpu;
  return {with_offload(base, 0, kNone, kNone), with_offload(base, 1, kNone, kNone), with_offload(base, 2, kNone, kNone),
          with_offload(base, 2, kCpu, kNone),  with_offload(base, 3, kNone, kNone), with_offload(base, 3, kNone, kCpu),
          with_offload(base, 3, kCpu, kCpu)};
}

// The rows of --detailed: every stage plain and with optimizer offload to each device, and
// at stage 3 parameter offload alone and with the optimizer's on the same device.
std::vector<Setup> every_setup(const Setup& base) {
  constexpr Offload kNone = Offload::kNone, kCpu = Offload::kCpu, kNvme = Offload::kNvme;
  std::vector<Setup> all{with_offload(base, 0, kNone, kNone)};
  for (int stage : {1, 2, 3}) {
    for (Offload optimizer : {kNone, kCpu, kNvme}) all.push_back(with_offload(base, stage, optimizer, kNone));
  }
  all.push_back(with_offload(base, 3, kNone, kNvme));
  all.push_back(with_offload(base, 3, kCpu, kCpu));
  all.push_back(with_offload(base, 3, kNvme, kNvme));
  return all;
}

}  // namespace

std::string detailed_report(const ModelShape& model, const Setup& base) {
  const Setup nvme = with_offload(base, 3, Offload::kNvme, Offload::kNone);
  std::string out = fmt::format(
      "zerotrain's estimate for {} ({} parameters, largest layer {}), {} rank(s), micro-batch {}, sequence {}, "
      "reduce_bucket_size {}, overlap_comm {}; NVMe offload: sub_group_size {}, buffer_count {}, pipeline_read {}, "
      "pipeline_write {} ({} buffer set(s)). MiB per rank; \"host\" is the part offload keeps in host memory, "
      "\"off host\" the rest of the peak, \"disk\" the NVMe swap files (not in the peak).\n",
      model.name, model.total_params(), model.largest_layer_params, base.world_size, base.micro_batch,
      model.block_size() ? sequence(model, base) : 0, base.reduce_bucket_size,
      base.overlap_comm ? "true" : "false", nvme.sub_group_size, nvme.buffer_count, nvme.pipeline_read,
      nvme.pipeline_write, nvme_buffer_sets({nvme.buffer_count, nvme.pipeline_read, nvme.pipeline_write}));
  for (Precision precision : {Precision::kFp32, Precision::kBf16, Precision::kFp16}) {
    Setup with = base;
    with.precision = precision;
    Setup checkpointed = with;
    checkpointed.activation_checkpointing = true;
    out += fmt::format("\n{}: activations {} MiB ({} MiB with activation checkpointing), runtime {} MiB\n",
                       to_string(precision), mib(activation_bytes(model, with)),
                       mib(activation_bytes(model, checkpointed)), mib(base.runtime_bytes));
    out += "| setup | params | grads | master | optimizer | buffers | model states | host | disk | peak | off host | "
           "peak (ckpt) |\n"
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
    for (Setup s : every_setup(with)) {
      const Breakdown b = estimate(model, s);
      s.activation_checkpointing = true;
      const Breakdown ck = estimate(model, s);
      out += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} |\n", options_of(s), mib(b.params),
                         mib(b.grads), mib(b.master), mib(b.optimizer), mib(b.buffers), mib(b.model_states()),
                         mib(b.host), mib(b.disk), mib(b.peak()), mib(b.peak() - b.host), mib(ck.peak()));
    }
  }
  return out;
}

namespace {

std::string count_text(int64_t n) {
  // 100000000 as 1e8: how the sizes are usually written in a ds_config.
  int exponent = 0;
  int64_t rest = n;
  while (rest >= 10 && rest % 10 == 0) rest /= 10, ++exponent;
  return rest == 1 && exponent >= 4 ? fmt::format("1e{}", exponent) : std::to_string(n);
}

struct Verdict {
  Breakdown breakdown;
  bool fits = false;
  bool host_short = false;   // only the host memory does not fit
  std::string line;          // for the procedure's printout
};

Verdict judge(const ModelShape& model, const Setup& s, const Budget& budget) {
  Verdict v;
  v.breakdown = estimate(model, s);
  const Breakdown& b = v.breakdown;
  const int64_t on_rank = b.peak() - b.host;
  const int64_t on_host = b.host * budget.ranks_per_node;
  const int64_t on_disk = b.disk * budget.ranks_per_node;
  const bool rank_ok = on_rank <= budget.memory_per_rank;
  const bool host_ok = b.host == 0 || !budget.host_memory || on_host <= *budget.host_memory;
  const bool disk_ok = b.disk == 0 || (budget.disk_bytes && on_disk <= *budget.disk_bytes);
  v.fits = rank_ok && host_ok && disk_ok;
  v.host_short = rank_ok && !host_ok;
  std::string extra;
  if (b.host > 0) extra += fmt::format(" + {} MiB of host memory", mib(on_host));
  if (b.disk > 0) extra += fmt::format(" + {} MiB of disk", mib(on_disk));
  if (!extra.empty()) extra += fmt::format(" for {} rank(s)", budget.ranks_per_node);
  if (s.offload_optimizer == Offload::kNvme) extra += fmt::format(" (sub_group_size {})", count_text(s.sub_group_size));
  v.line = fmt::format("  {}: {} MiB per rank{}{}\n", options_of(s), mib(on_rank), extra,
                       v.fits     ? " - fits"
                       : !rank_ok ? " - does not fit"
                       : !host_ok ? " - the host memory does not fit"
                                  : " - the disk does not fit");
  return v;
}

// Sub-groups to try with NVMe, largest first: larger ones make fewer, larger disk requests;
// smaller ones shrink the buffers, of which pipelining keeps three sets in memory.
std::vector<int64_t> sub_group_candidates(const Setup& base) {
  std::vector<int64_t> sizes;
  for (int64_t size : {int64_t{100000000}, int64_t{10000000}, int64_t{1000000}}) {
    const int64_t capped = std::min(size, base.sub_group_size);
    if (sizes.empty() || capped < sizes.back()) sizes.push_back(capped);
  }
  return sizes;
}

std::string config_of(const Setup& s) {
  std::string zero = fmt::format("\"stage\": {}", s.stage);
  if (config::traits_of(s.stage).shards_optimizer) {
    zero += fmt::format(", \"reduce_bucket_size\": {}, \"overlap_comm\": {}", s.reduce_bucket_size,
                        s.overlap_comm ? "true" : "false");
  }
  // The nvme_path placeholder is to be replaced by a folder on a local disk (not tmpfs).
  constexpr const char* kNvmePath = "/path/to/local/nvme";
  if (s.offload_optimizer == Offload::kNvme) {
    zero += fmt::format(", \"sub_group_size\": {}", count_text(s.sub_group_size));
    zero += fmt::format(",\n    \"offload_optimizer\": {{\"device\": \"nvme\", \"nvme_path\": \"{}\", "
                        "\"pipeline_read\": true, \"pipeline_write\": true}}",
                        kNvmePath);
  } else if (s.offload_optimizer == Offload::kCpu) {
    zero += ", \"offload_optimizer\": {\"device\": \"cpu\", \"pin_memory\": true}";
  }
  if (s.offload_param == Offload::kNvme) {
    zero += fmt::format(",\n    \"offload_param\": {{\"device\": \"nvme\", \"nvme_path\": \"{}\"}}", kNvmePath);
  } else if (s.offload_param == Offload::kCpu) {
    zero += ", \"offload_param\": {\"device\": \"cpu\", \"pin_memory\": true}";
  }
  std::string json = fmt::format("{{\n  \"zero_optimization\": {{{}}}", zero);
  if (s.precision == Precision::kBf16) json += ",\n  \"bf16\": {\"enabled\": true}";
  if (s.precision == Precision::kFp16) json += ",\n  \"fp16\": {\"enabled\": true, \"initial_scale_power\": 16}";
  return json + "\n}";
}

}  // namespace

Advice advise(const ModelShape& model, const Setup& base, const Budget& budget) {
  ZT_CHECK(budget.memory_per_rank > 0, UsageError, "--memory_per_rank must be positive");
  ZT_CHECK(budget.ranks_per_node >= 1, UsageError, "--ranks_per_node must be at least 1");
  ZT_CHECK(!budget.disk_bytes || *budget.disk_bytes > 0, UsageError, "--disk_bytes must be positive");
  Advice advice;
  for (const Setup& s : fastest_first(base)) {
    Verdict v = judge(model, s, budget);
    advice.why += v.line;
    if (v.fits) {
      advice.setup = s;
      advice.breakdown = v.breakdown;
      advice.fits = true;
      break;
    }
  }
  // Nothing fits in memory: with a disk budget, ZeRO-Infinity's stage 3 with the optimizer
  // states on disk, then the parameters too, pipelined (each sub-group read ahead and
  // written behind while another is stepped), with the largest sub-group that fits.
  if (!advice.fits && budget.disk_bytes) {
    for (Offload param : {Offload::kNone, Offload::kNvme}) {
      for (int64_t sub_group : sub_group_candidates(base)) {
        Setup s = with_offload(base, 3, Offload::kNvme, param);
        s.sub_group_size = sub_group;
        s.pipeline_read = s.pipeline_write = true;
        Verdict v = judge(model, s, budget);
        advice.why += v.line;
        if (!v.fits && v.host_short) continue;   // smaller sub-groups need smaller buffers
        if (!v.fits) break;
        advice.setup = s;
        advice.breakdown = v.breakdown;
        advice.fits = true;
        break;
      }
      if (advice.fits) break;
    }
  }
  if (!advice.fits) return advice;
  const Setup& s = advice.setup;
  advice.config_json = config_of(s);
  if (s.offload_optimizer == Offload::kNvme) {
    const NvmeBuffering buffering{s.buffer_count, s.pipeline_read, s.pipeline_write};
    const int64_t sets = nvme_buffer_sets(buffering);
    advice.note = fmt::format(
        "sub_group_size {}: the optimizer states stream through {} sets of fp32 sub-group buffers (master, exp_avg, "
        "exp_avg_sq), so that one sub-group is read ahead and one written behind while another is stepped: {} MiB "
        "per rank. Smaller sub-groups shrink them; larger ones make fewer, larger disk requests. Set nvme_path to a "
        "folder on a "
        "local disk (not tmpfs) with {} MiB free for {} rank(s); `zerotrain io-bench --path DIR` prints the \"aio\" "
        "block that suits it.",
        count_text(s.sub_group_size), sets, mib(advice.breakdown.host),
        mib(advice.breakdown.disk * budget.ranks_per_node), budget.ranks_per_node);
  }
  return advice;
}

}  // namespace zerotrain::estimate
