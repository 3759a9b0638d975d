// How each built-in model plugs into the registry (models.cpp): its presets, what it takes
// from the dataset, and how it is built and counted. One file per model implements one.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "zerotrain/estimate/detailed.h"
#include "zerotrain/models/model.h"

namespace zerotrain::models {

struct Builtin {
  std::map<std::string, Fields> presets;
  std::string default_preset;
  // The fields the dataset fixes; throws UsageError when the model cannot train on it.
  Fields (*fields_from_data)(const DataShape& data);
  std::unique_ptr<Model> (*make)(const Fields& fields, const DataShape& data);
  // The parameters and ZeRO-3 units in the order the module registers them, counted from
  // the fields alone (a 7B configuration would need 28 GB of weights just to be counted).
  estimate::ModelShape (*shape)(const Fields& fields, const DataShape& data);
  int64_t (*hidden_size)(const Fields& fields);
};

const Builtin& mlp_builtin();
const Builtin& gpt_builtin();
const Builtin& convnet_builtin();

}  // namespace zerotrain::models
