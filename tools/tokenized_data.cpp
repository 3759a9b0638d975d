#include "tools/tokenized_data.h"

#include <filesystem>

#include "zerotrain/core/error.h"
#include "zerotrain/core/output_path.h"
#include "zerotrain/data/open.h"
#include "zerotrain/data/tokenized/open_tokenized.h"
#include "zerotrain/data/tokenized/tokenizer_encoder.h"
#include "zerotrain/models/hf/hf_model.h"
#include "zerotrain/text/tokenizer.h"

namespace zerotrain::tools {
namespace {

namespace fs = std::filesystem;
namespace tok = data::tokenized;

// run_clm's rule: a document is tokenised as the tokenizer's __call__ does it, with its
// special tokens; so a tokenizer whose post-processor starts every text with bos (Llama's)
// gets a bos before each document, and one that adds nothing (GPT-2's) gets none.
bool adds_bos(const text::Tokenizer& tokenizer) {
  const auto bos = tokenizer.bos_id();
  if (!bos) return false;
  const std::vector<int32_t> with = tokenizer.encode("a", /*add_special_tokens=*/true);
  const std::vector<int32_t> without = tokenizer.encode("a", /*add_special_tokens=*/false);
  return !with.empty() && with.front() == *bos && (without.empty() || without.front() != *bos);
}

}  // namespace

bool is_hf_model(const std::string& model) { return model.rfind("hf:", 0) == 0; }

TrainData open_tokenized_train_data(const TrainDataOptions& o) {
  const std::string model_dir = o.model.substr(3);
  // The folder first: a folder that is no model says so before anything is said about the data.
  const int64_t block_size = models::hf::hf_block_size_of(model_dir, o.model_config);
  const size_t colon = o.spec.find(':');
  const std::string kind = o.spec.substr(0, colon);
  ZT_CHECK((kind == "jsonl" || kind == "text") && colon != std::string::npos && colon + 1 < o.spec.size(), UsageError,
           "--dataset ", o.spec, ": --model ", o.model, " trains on text tokenised with its tokenizer: give "
           "--dataset jsonl:PATH (lines of {\"text\": ...} or {\"prompt\": ..., \"completion\": ...}) or "
           "text:PATH (docs/finetune.md)");
  const fs::path path = o.spec.substr(colon + 1);
  const fs::path tokenizer_dir = o.tokenizer.empty() ? fs::path(model_dir) : fs::path(o.tokenizer);
  const text::Tokenizer tokenizer = text::Tokenizer::from_folder(tokenizer_dir);
  const tok::TextEncoder encoder = tok::encoder_of(tokenizer, adds_bos(tokenizer));
  const tok::TokenizedSplits splits = tok::open_tokenized_splits(
      path, kind == "jsonl" ? tok::CorpusKind::kJsonl : tok::CorpusKind::kText, block_size, encoder, o.needs_eval);
  TrainData out;
  out.train = data::first_samples(splits.train, o.max_train_samples, o.spec);
  if (o.needs_eval) out.eval = data::first_samples(splits.eval, o.max_eval_samples, o.spec);
  out.shape.name = o.spec;
  out.shape.kind = models::DataShape::Kind::kText;
  out.shape.vocab_size = tokenizer.vocab_size();
  files::register_input(path, "dataset file");
  // The folders read: no output of the run (the folder written back above all) may replace
  // their files.
  files::register_input(model_dir, "model folder");
  files::register_input(tokenizer_dir, "tokenizer folder");
  return out;
}

}  // namespace zerotrain::tools
