// zerotrain's own memory estimate: what one rank of *this* engine holds, piece by piece
// (docs/estimator.md). Model states follow the engine's buffers exactly (the same layout,
// bucket by bucket), so they match Engine::model_state_bytes(); activations follow what
// autograd saves for the built-in GPT and MLP and for the decoders built from Hugging Face
// folders; the process adds the runtime's own memory.
// The stage advisor walks DeepSpeed's procedure on these numbers. No LibTorch.
#pragma once

#include <cstdint>
#include <climits>
#include <optional>
#include <string>
#include <vector>

namespace zerotrain::estimate {

enum class Precision { kFp32, kBf16, kFp16 };
const char* to_string(Precision precision);

// Where offload puts what it moves (the config's offload_*.device).
enum class Offload { kNone, kCpu, kNvme };
const char* to_string(Offload offload);

// The architecture, for activations: the built-in models, and the decoders built from
// Hugging Face folders.
struct GptDims {
  int64_t n_layer = 0, n_head = 0, n_embd = 0, vocab_size = 0, block_size = 0;
};
struct MlpDims {
  int64_t n_in = 0, n_hidden = 0, n_layer = 0, n_out = 0;
};
// A decoder built from a Hugging Face folder (models/hf: GPT-2, and the Llama family: Llama,
// Mistral, Qwen2), from its config.json. Its modules keep other tensors for backward than the
// built-in GPT's (fused attention that keeps no probabilities, Llama's RMSNorm in fp32, a
// gated MLP, GPT-2's GELU op by op), so it is counted on its own.
struct DecoderDims {
  enum class Norm { kLayerNorm, kRmsNorm };   // GPT-2's; the Llama family's, computed in fp32
  Norm norm = Norm::kRmsNorm;
  int64_t n_layer = 0, n_head = 0, head_dim = 0, hidden = 0, intermediate = 0, vocab_size = 0;
  // Grouped-query attention's key/value heads. Attention keeps k and v repeated to n_head
  // heads (transformers' repeat_kv), so fewer of them do not shrink the activations.
  int64_t n_kv_head = 0;
  int64_t block_size = 0;       // the sequence it trains at (--model_config block_size=N)
  // How many [token, intermediate] tensors the MLP keeps: SwiGLU's gate, its silu, up and
  // their product (4); GPT-2's gelu_new, computed op by op as transformers does (5); a
  // fused GELU (2: its input and output).
  int64_t mlp_saved = 4;
  // Mistral: a sequence longer than this attends through an explicit [seq, seq] mask, which
  // each layer's attention keeps (0: none).
  int64_t sliding_window = 0;
};

struct ModelShape {
  std::string name;                    // for the report
  std::vector<int64_t> param_numels;   // trainable parameters in model order (the engine's layout)
  int64_t largest_layer_params = 0;    // the largest single module's own parameters
  int64_t frozen_params = 0;           // not trained, so not in param_numels; DeepSpeed counts them
  // ZeRO-3 units: for each entry of param_numels, the zerotrain::Sharded unit that owns it
  // (1, 2, ... in module order; 0: none). Empty: no units.
  std::vector<int> param_units;
  std::optional<GptDims> gpt;
  std::optional<MlpDims> mlp;
  std::optional<DecoderDims> decoder;
  int64_t total_params() const;
  // The sequence a language model trains at (gpt's or decoder's block_size); none for the others.
  std::optional<int64_t> block_size() const;
};

struct Setup {
  int world_size = 1;
  int stage = 0;                        // 0..3
  Precision precision = Precision::kFp32;
  Offload offload_optimizer = Offload::kNone;   // stages 1-3
  Offload offload_param = Offload::kNone;       // stage 3 only
  // Optimizer offload to nvme (docs/offload.md): the sub-group the step walks, which sizes
  // the store's buffers, and how many sub-groups are in memory at once.
  int64_t sub_group_size = 1000000000;  // elements: zero_optimization.sub_group_size
  int64_t buffer_count = 4;             // offload_optimizer.buffer_count
  bool pipeline_read = false;           // offload_optimizer.pipeline_read
  bool pipeline_write = false;          // offload_optimizer.pipeline_write
  int64_t reduce_bucket_size = 500000000;   // elements
  bool overlap_comm = false;
  int64_t micro_batch = 1;
  int64_t seq_len = 0;                  // 0: the model's block size
  bool activation_checkpointing = false;   // gradient checkpointing (docs/activation-checkpointing.md)
  int64_t param_persistence_threshold = 100000;   // stage 3: stage3_param_persistence_threshold
  int64_t model_persistence_threshold = INT64_MAX;
  int64_t prefetch_bucket_size = 50000000;        // stage 3: stage3_prefetch_bucket_size
  int64_t max_live_parameters = 1000000000;       // stage 3: stage3_max_live_parameters
  int64_t max_reuse_distance = 1000000000;        // stage 3: stage3_max_reuse_distance
  bool async_save = false;              // checkpoint.async_save: a snapshot of the saved state
  // The process's own memory before any model exists: LibTorch, its thread pools, the
  // communicator. Measured by `zerotrain train` as baseline_rss_bytes (docs/estimator.md).
  int64_t runtime_bytes = 0;
};

// Bytes of one rank.
struct Breakdown {
  int64_t params = 0;        // the flat parameter buffers (stage 3: this rank's shard)
  int64_t grads = 0;         // gradient buffers
  int64_t master = 0;        // fp32 master weights
  int64_t optimizer = 0;     // Adam's moments
  int64_t buffers = 0;       // gradient buckets in flight, the fp32 gradient copy of a half-precision step, nvme offload's sub-group buffers
  int64_t host = 0;          // of the above and the snapshot, what is kept in host memory (for a GPU job: off the GPU)
  int64_t disk = 0;          // nvme offload's swap files: not in memory, so not in the model states
  // checkpoint.async_save: the copy of what this rank saves (its fp32 weights and Adam
  // moments), in host memory while its file is written; counted in `host` too.
  int64_t snapshot = 0;
  int64_t activations = 0;   // saved for backward, one micro-batch
  int64_t backward_transient = 0;   // the largest gradients alive at once during backward
  int64_t gathered = 0;      // stage 3: full unit parameters alive at once (the unit computing, those prefetched or kept for reuse)
  int64_t runtime = 0;
  int64_t model_states() const { return params + grads + master + optimizer + buffers; }
  // The high-water mark of the process's resident memory.
  int64_t peak() const { return runtime + model_states() + gathered + activations + backward_transient + snapshot; }
};

Breakdown estimate(const ModelShape& model, const Setup& setup);

// Activation bytes saved for backward, for one micro-batch (0 for a model with no dims).
int64_t activation_bytes(const ModelShape& model, const Setup& setup);

// `zerotrain estimate --detailed`: every stage and offload option, for fp32, bf16 and fp16.
std::string detailed_report(const ModelShape& model, const Setup& base);

// What the advisor may use.
struct Budget {
  int64_t memory_per_rank = 0;
  std::optional<int64_t> host_memory;   // for what offload keeps in host memory, shared by a node's ranks
  // Free space under nvme_path, shared by a node's ranks: without it NVMe offload is not considered.
  std::optional<int64_t> disk_bytes;
  int ranks_per_node = 1;
};

struct Advice {
  Setup setup;
  Breakdown breakdown;
  bool fits = false;
  std::string why;            // the procedure, step by step
  std::string config_json;    // the fragment to paste
  std::string note;           // NVMe offload: the sub-group size chosen, and why
};

// DeepSpeed's procedure (HF's guide): try the fastest setup first (stage 0, then 1, 2, 3,
// then optimizer offload, then parameter offload, to host memory) and take the first that
// fits the budget. With a disk budget, NVMe offload comes last: stage 3 with the optimizer
// states on disk, then with the parameters too, each with the largest sub-group (1e8, 1e7
// or 1e6 elements) whose buffers fit.
Advice advise(const ModelShape& model, const Setup& base, const Budget& budget);

}  // namespace zerotrain::estimate
