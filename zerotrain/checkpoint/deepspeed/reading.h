// DeepSpeed's checkpoint as read, before anything is written: where each parameter's
// master and Adam's states lie in DeepSpeed's files (one piece per rank that held some of
// it), the buffers and frozen parameters, and the small state (counters, schedule, loss
// scaler, groups, optimizer) in the form of zerotrain's manifest. Internal to the import.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zerotrain/checkpoint/deepspeed/torch_file.h"
#include "zerotrain/checkpoint/manifest.h"
#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint::deepspeed {

using pickle::TensorRef;
using pickle::Value;

// Where a run of a parameter's elements lies in a DeepSpeed file: `first` onwards in `tensor`.
struct Source {
  const TorchFile* file = nullptr;
  TensorRef tensor;
  int64_t first = 0;
};

// Elements [begin, end) of a parameter, held by `rank`, with its master and Adam's states.
struct Piece {
  int rank = 0;
  int64_t begin = 0;
  int64_t end = 0;
  Source fp32;
  std::optional<Source> exp_avg, exp_avg_sq;
};

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  int group = 0;
  std::vector<Piece> pieces;
  int64_t covered = 0;  // elements the pieces cover so far
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

struct Whole {
  std::string name;
  const TorchFile* file = nullptr;
  TensorRef tensor;
};

struct Reading {
  std::filesystem::path dir;
  std::string tag;
  std::map<int, std::unique_ptr<TorchFile>> model_files;  // by data-parallel rank (stage 3), else rank 0
  std::map<int, std::unique_ptr<TorchFile>> optim_files;  // by data-parallel rank
  Json ds_config = Json::object();
  int world = 1;
  int saved_world = 1;  // dp_world_size: the ranks that saved it
  int stage = 0;
  std::string dtype = "fp32";
  std::vector<Param> params;
  std::map<std::string, size_t> param_index;
  std::vector<Whole> buffers;
  std::vector<Whole> frozen;  // parameters the optimizer does not step, whole
  std::vector<GroupRecord> groups;
  Counters counters;
  Json lr_scheduler;
  Json loss_scaler;
  Json optimizer;
  bool states = false;  // Adam's states are there (an optimizer that has stepped)
  std::function<void(const std::string&)> note;

  const TorchFile& model0() const { return *model_files.begin()->second; }
  Param& add_param(std::string name, std::vector<int64_t> shape, int group) {
    ZT_CHECK(!param_index.count(name), CheckpointError, dir.string(), ": parameter ", name, " is listed twice");
    param_index[name] = params.size();
    params.push_back({std::move(name), std::move(shape), group, {}, 0});
    return params.back();
  }
  Param& param(const std::string& name, std::string_view where_from) {
    auto it = param_index.find(name);
    ZT_CHECK(it != param_index.end(), CheckpointError, where_from, ": parameter ", name,
             " is not among the model's parameters (param_shapes)");
    return params[it->second];
  }
};

// Reads DS_DIR's tag (the one `latest` names where `tag` is empty) into a Reading, checking
// that every parameter is covered; CheckpointError naming the file and field otherwise.
Reading read_deepspeed(const std::filesystem::path& ds_dir, const std::string& tag,
                       std::function<void(const std::string&)> note);

}  // namespace zerotrain::checkpoint::deepspeed
