// `--model hf:DIR`: a causal language model built from a Hugging Face folder (config.json and
// safetensors weights) as a models::Model the Trainer drives; models/models.cpp sends every
// name starting with "hf:" here. The config string takes one key, block_size=N: the
// sequence length to train at (default min(1024, the model's max_position_embeddings)).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "zerotrain/estimate/detailed.h"
#include "zerotrain/models/model.h"

namespace zerotrain::models::hf {

// `dir`: the folder (the name without "hf:"). Builds the module and loads its weights; at
// stage 3 under the Trainer's ZeroInit each rank reads only its chunks (hf_load.h). Throws
// ConfigError for a folder it cannot build a model from, UsageError for a bad config string
// or a dataset the model cannot train on (images, a vocabulary larger than the model's).
std::unique_ptr<Model> make_hf_model(const std::string& dir, const std::string& config, const DataShape& data);

// From config.json alone: the parameters in module order with their ZeRO-3 units, as
// models::shape_of(Module&) counts the built model, and the decoder's dimensions for the
// activation estimate (estimate::DecoderDims).
estimate::ModelShape hf_shape_of(const std::string& dir, const std::string& config, const DataShape& data);
int64_t hf_hidden_size_of(const std::string& dir);
// The sequence length the model trains at: the config string's block_size, or its default.
// The data is cut into blocks of it before the model is built.
int64_t hf_block_size_of(const std::string& dir, const std::string& config);

}  // namespace zerotrain::models::hf
