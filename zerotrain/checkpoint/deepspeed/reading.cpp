#include "zerotrain/checkpoint/deepspeed/reading.h"

#include <algorithm>
#include <cctype>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>

namespace zerotrain::checkpoint::deepspeed {
namespace {

namespace fs = std::filesystem;
using Kind = Value::Kind;

// A field of a DeepSpeed pickle; an error names the file and the key.
std::string where(const TorchFile& f, std::string_view key) {
  return f.path().filename().string() + ": " + std::string(key);
}
const Value& field(const TorchFile& f, const Value& v, std::string_view key) { return v.at(key, where(f, key)); }
const std::vector<pickle::ValuePtr>& list_field(const TorchFile& f, const Value& v, std::string_view key) {
  return field(f, v, key).as_items(where(f, key));
}

// A pickled value as JSON (the saved ds_config). Depth-bounded: through its memo a damaged
// pickle can make a dict that holds itself.
Json to_json(const Value& v, int depth = 0) {
  ZT_CHECK(depth < 64, CheckpointError, "ds_config: nested deeper than 64 levels (a damaged pickle?)");
  switch (v.kind) {
    case Kind::kNone:
      return nullptr;
    case Kind::kBool:
      return v.boolean;
    case Kind::kInt:
      return v.integer;
    case Kind::kFloat:
      return v.number;
    case Kind::kString:
      return v.text;
    case Kind::kList:
    case Kind::kTuple: {
      Json out = Json::array();
      for (const auto& item : v.items) out.push_back(to_json(*item, depth + 1));
      return out;
    }
    case Kind::kDict: {
      Json out = Json::object();
      for (const auto& [k, x] : v.entries) {
        out[k->kind == Kind::kString ? k->text
            : k->kind == Kind::kInt  ? std::to_string(k->integer)
                                     : k->describe()] = to_json(*x, depth + 1);
      }
      return out;
    }
    default:
      return v.describe();
  }
}

std::vector<int64_t> shape_of(const Value& v, std::string_view what) {
  std::vector<int64_t> shape;
  for (const auto& d : v.as_items(what)) shape.push_back(d->as_int(what));
  return shape;
}

// Adam's step: a tensor (torch >= 1.12) or a number.
int64_t step_of(const TorchFile& f, const Value& v, std::string_view what) {
  if (v.is(Kind::kTensor)) return static_cast<int64_t>(f.read_scalar(v.tensor, what));
  return static_cast<int64_t>(v.as_number(what));
}

// An integer of the saved ds_config, or `fallback` where it is absent or not an integer.
int64_t int_or(const Json& block, const char* key, int64_t fallback) {
  return block.is_object() && block.contains(key) && block[key].is_number_integer() ? block[key].get<int64_t>()
                                                                                    : fallback;
}

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return std::tolower(c); });
  return s;
}

// --- the files of the tag -------------------------------------------------------------

void find_files(Reading& r, const fs::path& ds_dir, const std::string& tag) {
  ZT_CHECK(fs::is_directory(ds_dir), CheckpointError, ds_dir.string(), ": no such directory");
  if (!tag.empty()) {
    r.dir = ds_dir / tag;
    r.tag = tag;
  } else if (fs::is_regular_file(ds_dir / "latest")) {
    std::ifstream in(ds_dir / "latest");
    std::stringstream text;
    text << in.rdbuf();
    r.tag = text.str();
    r.tag.erase(r.tag.find_last_not_of(" \n\r\t") + 1);
    ZT_CHECK(!r.tag.empty() && r.tag.find('/') == std::string::npos, CheckpointError, (ds_dir / "latest").string(),
             ": names no tag ('", r.tag, "'); give one with --tag");
    r.dir = ds_dir / r.tag;
  } else {
    r.dir = ds_dir;  // a tag directory itself
    r.tag = fs::absolute(ds_dir).lexically_normal().filename().string();
    if (r.tag.empty()) r.tag = fs::absolute(ds_dir).lexically_normal().parent_path().filename().string();
  }
  ZT_CHECK(
      fs::is_directory(r.dir), CheckpointError, r.dir.string(), ": no such tag directory (the tags here: ",
      [&] {
        std::string names;
        for (const auto& e : fs::directory_iterator(ds_dir)) {
          if (e.is_directory()) names += (names.empty() ? "" : ", ") + e.path().filename().string();
        }
        return names.empty() ? std::string("none") : names;
      }(),
      ")");
  static const std::regex kModel(R"(mp_rank_(\d+)_model_states\.pt)");
  static const std::regex kModel3(R"(zero_pp_rank_(\d+)_mp_rank_(\d+)_model_states\.pt)");
  static const std::regex kOptim(R"((bf16_)?zero_pp_rank_(\d+)_mp_rank_(\d+)_optim_states\.pt)");
  for (const auto& e : fs::directory_iterator(r.dir)) {
    const std::string name = e.path().filename().string();
    std::smatch m;
    ZT_CHECK(name.rfind("layer_", 0) != 0 && name.rfind("expp_rank_", 0) != 0, CheckpointError, e.path().string(),
             ": a pipeline-parallel or mixture-of-experts checkpoint, which this import does not convert");
    auto check_mp = [&](const std::string& mp) {
      ZT_CHECK(std::stoi(mp) == 0, CheckpointError, e.path().string(),
               ": a model-parallel checkpoint (tensor parallelism), which this import does not convert");
    };
    if (std::regex_match(name, m, kModel3)) {
      check_mp(m[2]);
      r.model_files[std::stoi(m[1])] = std::make_unique<TorchFile>(e.path());
    } else if (std::regex_match(name, m, kModel)) {
      check_mp(m[1]);
      r.model_files[0] = std::make_unique<TorchFile>(e.path());
    } else if (std::regex_match(name, m, kOptim)) {
      check_mp(m[3]);
      r.optim_files[std::stoi(m[2])] = std::make_unique<TorchFile>(e.path());
    }
  }
  ZT_CHECK(!r.model_files.empty(), CheckpointError, r.dir.string(),
           ": no *_model_states.pt, so not a DeepSpeed checkpoint tag");
}

// --- what every checkpoint has ----------------------------------------------------------

void read_common(Reading& r) {
  const TorchFile& f = r.model0();
  const Value& root = f.root();
  if (const Value* c = root.find("ds_config")) r.ds_config = to_json(*c);
  if (!r.ds_config.is_object()) r.ds_config = Json::object();
  const Json zero = r.ds_config.value("zero_optimization", Json::object());
  r.stage = static_cast<int>(int_or(zero, "stage", 0));
  auto enabled = [&](const char* key) {
    const Json block = r.ds_config.value(key, Json::object());
    return block.is_object() && block.value("enabled", false) == true;
  };
  r.dtype = enabled("fp16") ? "fp16" : (enabled("bf16") || enabled("bfloat16")) ? "bf16" : "fp32";
  auto count = [&](const char* key, int64_t fallback) {
    const Value* v = root.find(key);
    return v && !v->is_none() ? v->as_int(where(f, key)) : fallback;
  };
  r.saved_world = static_cast<int>(count("dp_world_size", 1));
  r.counters.global_steps = count("global_steps", 0);
  r.counters.global_samples = count("global_samples", 0);
  r.counters.skipped_steps = count("skipped_steps", 0);
  r.counters.micro_steps = r.counters.global_steps * int_or(r.ds_config, "gradient_accumulation_steps", 1);
  const Value* sched = root.find("lr_scheduler");
  const Json sched_config = r.ds_config.value("scheduler", Json());
  if (sched && sched->is(Kind::kDict) && sched_config.is_object() && sched_config.contains("type")) {
    r.lr_scheduler = {{"type", sched_config["type"]},
                      {"last_batch_iteration",
                       field(f, *sched, "last_batch_iteration").as_int(where(f, "lr_scheduler.last_batch_iteration"))}};
  } else if (sched && !sched->is_none()) {
    r.note(
        "the learning-rate schedule's state is not imported: its scheduler is not in the checkpoint's ds_config "
        "(a client scheduler); the resumed run's schedule starts where its own arguments say");
  }
  const Value* names = root.find("buffer_names");
  const Value& module = field(f, root, "module");
  if (names && !names->is_none()) {
    for (const auto& n : names->as_items(where(f, "buffer_names"))) {
      const std::string& name = n->as_string(where(f, "buffer_names"));
      const Value* t = module.find(name);
      ZT_CHECK(t && t->is(Kind::kTensor), CheckpointError, where(f, "module"), ": buffer ", name,
               " is not a tensor in it");
      r.buffers.push_back({name, &f, t->tensor});
    }
  }
}

// A group's learning rate, weight decay and steps, from the inner optimizer's param group
// and the state of its first parameter.
GroupRecord group_record(const TorchFile& f, const Value& param_group, const Value* state, size_t index) {
  GroupRecord g;
  g.name = "group" + std::to_string(index);
  g.lr = field(f, param_group, "lr").as_number(where(f, "param_groups.lr"));
  if (const Value* wd = param_group.find("weight_decay"))
    g.weight_decay = wd->as_number(where(f, "param_groups.weight_decay"));
  if (state && state->find("step")) g.optimizer_steps = step_of(f, *state->find("step"), where(f, "state.step"));
  if (const Value* ams = param_group.find("amsgrad")) {
    ZT_CHECK(ams->as_int(where(f, "amsgrad")) == 0, CheckpointError, where(f, "param_groups"),
             ": AMSGrad's states are not imported (zerotrain's Adam has none)");
  }
  return g;
}

std::optional<Source> state_source(const TorchFile& f, const Value* state, const char* key, int64_t first) {
  if (!state || !state->find(key)) return std::nullopt;
  return Source{&f, state->find(key)->as_tensor(where(f, std::string("state.") + key)), first};
}

void note_states(Reading& r, bool have) {
  if (r.params.empty()) return;
  r.states = have;
  if (!have) r.note("the optimizer has not stepped yet: no Adam states to import; they start at zero");
}

// The optimizer files of a partitioned checkpoint: one per rank that saved it, ranks 0..N-1.
void check_optim_files(const Reading& r) {
  ZT_CHECK(
      static_cast<int>(r.optim_files.size()) == r.saved_world && r.optim_files.rbegin()->first == r.saved_world - 1,
      CheckpointError, r.dir.string(), ": DeepSpeed saved it from ", r.saved_world,
      " ranks (dp_world_size), but the tag has ", r.optim_files.size(),
      " *_optim_states.pt files (a rank's file missing, or an overwritten or incomplete checkpoint?)");
}

// Registers the trained parameters `param_shapes` lists, one dict per group (stages 1-2) or
// sub-group (stage 3), in flat order; returns each dict's parameters' indices.
std::vector<std::vector<size_t>> register_params(Reading& r) {
  const TorchFile& m = r.model0();
  const auto& groups = list_field(m, m.root(), "param_shapes");
  std::vector<std::vector<size_t>> members(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) {
    ZT_CHECK(groups[g]->is(Kind::kDict), CheckpointError, where(m, "param_shapes"), ": group ", g, " is ",
             groups[g]->describe());
    for (const auto& [name, shape] : groups[g]->entries) {
      members[g].push_back(r.params.size());
      r.add_param(name->as_string(where(m, "param_shapes")), shape_of(*shape, where(m, "param_shapes")),
                  static_cast<int>(g));
    }
  }
  return members;
}

// --- ZeRO stages 1 and 2, and bf16 without ZeRO (BF16_Optimizer): flat partitions ----------

void read_partitioned(Reading& r) {
  const size_t groups = register_params(r).size();
  check_optim_files(r);
  r.world = r.saved_world;
  bool have_states = true;
  for (const auto& [rank, file] : r.optim_files) {
    const TorchFile& f = *file;
    const Value& osd = field(f, f.root(), "optimizer_state_dict");
    const auto& fp32 = list_field(f, osd, "single_partition_of_fp32_groups");
    const Value& base = field(f, osd, "base_optimizer_state");
    const Value& state = field(f, base, "state");
    const auto& pgroups = list_field(f, base, "param_groups");
    const auto& mappings = list_field(f, osd, "param_slice_mappings");
    ZT_CHECK(fp32.size() == groups && mappings.size() == groups && pgroups.size() == groups, CheckpointError,
             where(f, "optimizer_state_dict"), ": ", fp32.size(), " fp32 partitions, ", mappings.size(),
             " slice mappings and ", pgroups.size(), " parameter groups for the model's ", groups, " groups");
    if (const Value* count = osd.find("partition_count")) {
      for (const auto& c : count->as_items(where(f, "partition_count"))) {
        ZT_CHECK(c->as_int(where(f, "partition_count")) == r.world, CheckpointError, where(f, "partition_count"),
                 ": partitioned over ", c->as_int("partition_count"), " ranks, but the tag has ", r.world,
                 " optimizer files (an overwritten or incomplete checkpoint?)");
      }
    }
    for (size_t g = 0; g < groups; ++g) {
      const Value* st = state.find(static_cast<int64_t>(g));
      have_states = have_states && st && st->find("exp_avg") && st->find("exp_avg_sq");
      if (rank == 0) r.groups.push_back(group_record(f, *pgroups[g], st, g));
      const TensorRef& part = fp32[g]->as_tensor(where(f, "single_partition_of_fp32_groups"));
      for (const auto& [key, address] : mappings[g]->entries) {
        const std::string name = key->as_string(where(f, "param_slice_mappings"));
        const int64_t numel = field(f, *address, "numel").as_int(where(f, "fragment_address.numel"));
        const int64_t start = field(f, *address, "start").as_int(where(f, "fragment_address.start"));
        if (numel == 0) continue;
        Param& p = r.param(name, where(f, "param_slice_mappings"));
        ZT_CHECK(start >= 0 && start + numel <= part.numel() && p.covered + numel <= p.numel(), CheckpointError,
                 where(f, "param_slice_mappings"), ": ", name, "'s slice [", start, ", ", start + numel,
                 ") does not fit its partition of ", part.numel(), " elements or its ", p.numel(), " elements");
        p.pieces.push_back({rank,
                            p.covered,
                            p.covered + numel,
                            {&f, part, start},
                            state_source(f, st, "exp_avg", start),
                            state_source(f, st, "exp_avg_sq", start)});
        p.covered += numel;
      }
    }
  }
  note_states(r, have_states);
}

// --- ZeRO stage 3: every parameter split over the ranks, sub-groups of flats ----------------

void read_stage3(Reading& r) {
  const std::vector<std::vector<size_t>> members = register_params(r);  // by sub-group
  check_optim_files(r);
  r.world = r.saved_world;
  bool have_states = true;
  for (const auto& [rank, file] : r.optim_files) {
    const TorchFile& f = *file;
    const Value& osd = field(f, f.root(), "optimizer_state_dict");
    const auto& flats = list_field(f, osd, "fp32_flat_groups");
    const Value& inner = field(f, osd, "optimizer_state_dict");
    const Value& state = field(f, inner, "state");
    const auto& pgroups = list_field(f, inner, "param_groups");
    ZT_CHECK(flats.size() == members.size(), CheckpointError, where(f, "fp32_flat_groups"), ": ", flats.size(),
             " flat groups for the model's ", members.size(), " sub-groups");
    // The parameter group of each sub-group: the one whose 'params' lists its index.
    std::vector<int> group_of(members.size(), 0);
    for (size_t g = 0; g < pgroups.size(); ++g) {
      const auto& indices = list_field(f, *pgroups[g], "params");
      for (const auto& k : indices) {
        const int64_t index = k->as_int(where(f, "param_groups.params"));
        if (index >= 0 && index < static_cast<int64_t>(group_of.size()))
          group_of[static_cast<size_t>(index)] = static_cast<int>(g);
      }
      if (rank == 0) {
        const Value* st = indices.empty() ? nullptr : state.find(indices.front()->as_int("params"));
        r.groups.push_back(group_record(f, *pgroups[g], st, g));
      }
    }
    for (size_t k = 0; k < members.size(); ++k) {
      const TensorRef& flat = flats[k]->as_tensor(where(f, "fp32_flat_groups"));
      const Value* st = state.find(static_cast<int64_t>(k));
      have_states = have_states && st && st->find("exp_avg") && st->find("exp_avg_sq");
      int64_t offset = 0;
      for (size_t index : members[k]) {
        Param& p = r.params[index];
        p.group = group_of[k];
        const int64_t per_rank = (p.numel() + r.world - 1) / r.world;
        const int64_t begin = std::min(p.numel(), rank * per_rank), end = std::min(p.numel(), begin + per_rank);
        ZT_CHECK(offset + per_rank <= flat.numel(), CheckpointError, where(f, "fp32_flat_groups"), ": sub-group ", k,
                 " holds ", flat.numel(), " elements, fewer than its parameters' partitions need (", p.name, ")");
        if (end > begin) {
          p.pieces.push_back({rank,
                              begin,
                              end,
                              {&f, flat, offset},
                              state_source(f, st, "exp_avg", offset),
                              state_source(f, st, "exp_avg_sq", offset)});
          p.covered += end - begin;
        }
        offset += per_rank;
      }
    }
  }
  for (Param& p : r.params) {  // pieces in element order (the ranks came in order already)
    std::sort(p.pieces.begin(), p.pieces.end(), [](const Piece& a, const Piece& b) { return a.begin < b.begin; });
  }
  note_states(r, have_states);
}

// --- no ZeRO, fp32 or fp16: whole parameters in the model states ------------------------

void read_unpartitioned(Reading& r) {
  const TorchFile& f = r.model0();
  const Value& module = field(f, f.root(), "module");
  std::set<std::string> buffers;
  for (const auto& b : r.buffers) buffers.insert(b.name);
  std::vector<std::pair<std::string, TensorRef>> trainable;
  for (const auto& [key, t] : module.entries) {
    const std::string name = key->as_string(where(f, "module"));
    if (!buffers.count(name)) trainable.emplace_back(name, t->as_tensor(where(f, "module." + name)));
  }
  const Value* opt = f.root().find("optimizer");
  ZT_CHECK(opt && opt->is(Kind::kDict), CheckpointError, where(f, "optimizer"),
           ": no optimizer state in the model states (saved without one?); nothing to import the fp32 weights from");
  const bool fp16 = opt->find("optimizer_state_dict") != nullptr;  // FP16_Optimizer wraps torch's
  const Value& inner = fp16 ? *opt->find("optimizer_state_dict") : *opt;
  const Value& state = field(f, inner, "state");
  const auto& pgroups = list_field(f, inner, "param_groups");
  const Value* groups32 = fp16 ? opt->find("fp32_groups") : nullptr;  // unfused
  const Value* flats32 = fp16 ? opt->find("fp32_groups_flat") : nullptr;
  ZT_CHECK(!fp16 || groups32 || flats32, CheckpointError, where(f, "optimizer"),
           ": an fp16 optimizer without fp32_groups or fp32_groups_flat");
  size_t next = 0;
  bool have_states = true;
  auto take_param = [&](size_t g) -> Param& {
    ZT_CHECK(next < trainable.size(), CheckpointError, where(f, "optimizer.param_groups"),
             ": more parameters in the optimizer than trainable tensors in the module (", trainable.size(), ")");
    const auto& [name, weights] = trainable[next++];
    Param& p = r.add_param(name, weights.shape, static_cast<int>(g));
    p.pieces.push_back({0, 0, p.numel(), {&f, weights, 0}, std::nullopt, std::nullopt});
    p.covered = p.numel();
    return p;
  };
  for (size_t g = 0; g < pgroups.size(); ++g) {
    const auto& indices = list_field(f, *pgroups[g], "params");
    const Value* first_state = indices.empty() ? nullptr : state.find(indices.front()->as_int("params"));
    r.groups.push_back(group_record(f, *pgroups[g], first_state, g));
    if (flats32) {
      // Fused FP16_Optimizer: one fp32 flat per group, the group's parameters end to end,
      // and torch's state over that flat.
      const auto& flat = flats32->as_items(where(f, "fp32_groups_flat"));
      ZT_CHECK(g < flat.size(), CheckpointError, where(f, "fp32_groups_flat"), ": no flat for group ", g);
      const TensorRef& master = flat[g]->as_tensor(where(f, "fp32_groups_flat"));
      for (int64_t offset = 0; offset < master.numel();) {
        Piece& piece = take_param(g).pieces.back();
        piece.fp32 = {&f, master, offset};
        piece.exp_avg = state_source(f, first_state, "exp_avg", offset);
        piece.exp_avg_sq = state_source(f, first_state, "exp_avg_sq", offset);
        have_states = have_states && piece.exp_avg && piece.exp_avg_sq;
        offset += piece.end;
      }
      continue;
    }
    for (size_t j = 0; j < indices.size(); ++j) {
      Piece& piece = take_param(g).pieces.back();
      const Value* st = state.find(indices[j]->as_int("params"));
      if (groups32) {  // unfused FP16_Optimizer: an fp32 master per parameter
        const auto& group = groups32->as_items(where(f, "fp32_groups"));
        ZT_CHECK(g < group.size() && j < group[g]->as_items("fp32_groups").size(), CheckpointError,
                 where(f, "fp32_groups"), ": fewer fp32 masters than parameters");
        piece.fp32 = {&f, group[g]->items[j]->as_tensor(where(f, "fp32_groups")), 0};
      }
      piece.exp_avg = state_source(f, st, "exp_avg", 0);
      piece.exp_avg_sq = state_source(f, st, "exp_avg_sq", 0);
      have_states = have_states && piece.exp_avg && piece.exp_avg_sq;
    }
  }
  ZT_CHECK(next == trainable.size(), CheckpointError, where(f, "module"), ": ", trainable.size() - next,
           " tensors of the module are neither buffers nor in the optimizer (frozen parameters), e.g. ",
           trainable[next].first, "; frozen parameters without ZeRO are not imported");
  r.world = 1;
  note_states(r, have_states);
}

// Tensors of the module that are neither buffers nor trained: frozen parameters. Whole in the
// module at stages 0-2; at stage 3 they are partitioned (empty in the module), which this
// import refuses rather than drop.
void read_frozen(Reading& r) {
  const TorchFile& f = r.model0();
  std::set<std::string> known;
  for (const auto& b : r.buffers) known.insert(b.name);
  for (const auto& p : r.params) known.insert(p.name);
  for (const auto& [key, t] : field(f, f.root(), "module").entries) {
    const std::string name = key->as_string(where(f, "module"));
    if (known.count(name)) continue;
    const TensorRef& tensor = t->as_tensor(where(f, "module." + name));
    ZT_CHECK(tensor.numel() > 0 || r.stage != 3, CheckpointError, where(f, "module"), ": ", name,
             " is a frozen parameter partitioned by ZeRO stage 3, which this import does not assemble; "
             "unfreeze it or save the checkpoint at stage 0-2");
    r.frozen.push_back({name, &f, tensor});
  }
}

// --- the loss scaler (fp16) and the optimizer's name ------------------------------------

void read_loss_scaler(Reading& r) {
  if (r.dtype != "fp16") return;
  const Json fp16 = r.ds_config.value("fp16", Json::object());
  const int64_t hysteresis = int_or(fp16, "hysteresis", 2);
  const Value* holder = nullptr;
  const TorchFile* file = nullptr;
  if (!r.optim_files.empty()) {
    file = r.optim_files.begin()->second.get();
    holder = file->root().find("optimizer_state_dict");
    if (holder && holder->find("loss_scaler")) holder = holder->find("loss_scaler");
  } else {
    file = &r.model0();
    holder = file->root().find("optimizer");
  }
  const Value* scale = holder ? holder->find("cur_scale") : nullptr;
  if (!scale) {
    r.note("no loss-scaler state found: the resumed run's scaler starts from the config's initial scale");
    return;
  }
  auto integer = [&](const char* key, int64_t fallback) {
    const Value* v = holder->find(key);
    return v && !v->is_none() ? static_cast<int64_t>(v->as_number(where(*file, key))) : fallback;
  };
  r.loss_scaler = {{"scale", scale->as_number(where(*file, "cur_scale"))},
                   {"iteration", integer("cur_iter", r.counters.global_steps)},
                   {"last_overflow_iteration", integer("last_overflow_iter", -1)},
                   {"hysteresis_left", integer("cur_hysteresis", hysteresis)}};
}

void name_optimizer(Reading& r) {
  const Json config = r.ds_config.value("optimizer", Json());
  Json params = Json::object();
  std::string type;
  if (config.is_object() && config.contains("type") && config["type"].is_string()) {
    type = lower(config["type"].get<std::string>());
    params = config.value("params", Json::object());
    ZT_CHECK(type == "adam" || type == "adamw", CheckpointError, r.dir.string(), ": the optimizer is ",
             config["type"].get<std::string>(), "; only Adam's and AdamW's states are imported");
    const bool decoupled = type == "adamw" || params.value("adam_w_mode", true);
    r.optimizer = {{"type", decoupled ? "AdamW (fused)" : "Adam (fused)"}, {"params", params}};
  } else {
    // A client optimizer (the HF Trainer's torch.optim.AdamW, when ds_config names none): its
    // states are Adam's where they have exp_avg and exp_avg_sq.
    r.note("the optimizer is not in the checkpoint's ds_config (a client optimizer): read as AdamW");
    r.optimizer = {{"type", "AdamW (fused)"}, {"params", Json::object()}};
  }
  if (!r.groups.empty()) {
    r.optimizer["params"]["lr"] = r.groups.front().lr;
    r.optimizer["params"]["weight_decay"] = r.groups.front().weight_decay;
  }
}

}  // namespace

Reading read_deepspeed(const std::filesystem::path& ds_dir, const std::string& tag,
                       std::function<void(const std::string&)> note) {
  Reading r;
  r.note = note ? std::move(note) : [](const std::string&) {};
  find_files(r, ds_dir, tag);
  read_common(r);
  const bool flat = !r.optim_files.empty() && r.optim_files.begin()
                                                      ->second->root()
                                                      .at("optimizer_state_dict", r.dir.string())
                                                      .find("single_partition_of_fp32_groups") != nullptr;
  if (r.stage == 3) {
    ZT_CHECK(!r.optim_files.empty(), CheckpointError, r.dir.string(),
             ": a ZeRO stage 3 checkpoint without its *_optim_states.pt files");
    read_stage3(r);
  } else if (flat) {
    read_partitioned(r);
  } else {
    ZT_CHECK(r.optim_files.empty(), CheckpointError, r.dir.string(),
             ": optimizer files of a layout this import does not know");
    read_unpartitioned(r);
  }
  for (const Param& p : r.params) {
    ZT_CHECK(p.covered == p.numel(), CheckpointError, r.dir.string(), ": parameter ", p.name, " has ", p.numel(),
             " elements but the ranks' files hold ", p.covered, " of them (a rank's file missing?)");
  }
  ZT_CHECK(!r.params.empty(), CheckpointError, r.dir.string(), ": no trainable parameters found");
  if (r.stage > 0 || flat) read_frozen(r);  // without ZeRO, read_unpartitioned refuses them
  read_loss_scaler(r);
  name_optimizer(r);
  return r;
}

}  // namespace zerotrain::checkpoint::deepspeed
