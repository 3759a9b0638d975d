// zt_hf_forward: logits of a model built from a Hugging Face folder (--model hf:DIR), for
// tests/python/test_hf_models.py to compare with transformers' forward on the same ids.
//
//   zt_hf_forward DIR IDS.json OUT.safetensors [--dtype fp32|bf16]   built whole, forward
//   zerotrain launch --nproc_per_node 2 -- zt_hf_forward DIR IDS.json OUT.safetensors --zero3 [--dtype ...]
//       built under ZeroInit at stage 3 (each rank reads its chunks), the forward through
//       the engine; rank 0 writes the logits, every rank OUT.rankR.json with its peak RSS
//       while loading, and the loss before and after one training step on the ids (targets:
//       the next id, -100 for the last position); --checkpointing: with gradient checkpointing;
//       --save DIR: before the step, the model written back as a folder (Model::hf_export)
//   zt_hf_forward DIR --check-shape     shape_of("hf:DIR") from config.json against the built model's
//
// IDS.json: [[id, ...], ...] (B rows of T ids). The logits are written in fp32 as the
// tensor "logits" [B, T, V].
#include <torch/torch.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "zerotrain/checkpoint/safetensors.h"
#include "zerotrain/config/json_text.h"
#include "zerotrain/core/input_file.h"
#include "zerotrain/engine/engine.h"
#include "zerotrain/models/hf/hf_modules.h"
#include "zerotrain/models/models.h"
#include "zerotrain/stages/stage3/zero_init.h"

namespace {

namespace zm = zerotrain::models;

int64_t status_kib(const char* key) {   // a "Key:   N kB" line of /proc/self/status
  std::ifstream in("/proc/self/status");
  const std::string prefix = std::string(key) + ":";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) == 0) return std::stoll(line.substr(prefix.size()));
  }
  return -1;
}

// The peak of this process's resident memory while it is alive, from its start. Writing "5"
// to /proc/self/clear_refs resets VmHWM to the current RSS (Linux 4.0+), so VmHWM at the end
// is the peak of the span alone, however briefly it was reached. Where the write is refused
// (a sandbox), a thread samples VmRSS every millisecond: it can miss a peak shorter than
// that, which a loader's allocations, each as long as its file read, are not.
class PeakRss {
 public:
  PeakRss() {
    std::ofstream clear("/proc/self/clear_refs");
    clear << "5";
    clear.flush();
    reset_ = clear.good();
    start_ = status_kib("VmRSS");
    if (!reset_) {
      sampler_ = std::thread([this] {
        while (!stop_) {
          peak_ = std::max<int64_t>(peak_, status_kib("VmRSS"));
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      });
    }
  }
  // Bytes above the RSS at construction.
  int64_t delta_bytes() {
    int64_t peak = 0;
    if (reset_) {
      peak = status_kib("VmHWM");
    } else {
      stop_ = true;
      sampler_.join();
      peak = std::max<int64_t>(peak_, status_kib("VmRSS"));
    }
    return (peak - start_) * 1024;
  }
  const char* method() const { return reset_ ? "VmHWM after clear_refs" : "VmRSS sampled every 1 ms"; }

 private:
  bool reset_ = false;
  int64_t start_ = 0;
  std::atomic<int64_t> peak_{0};
  std::atomic<bool> stop_{false};
  std::thread sampler_;
};

torch::Tensor read_ids(const std::string& path) {
  const auto json = zerotrain::config::read_json_file(path);
  std::vector<int64_t> flat;
  const int64_t rows = static_cast<int64_t>(json.size());
  for (const auto& row : json) {
    for (const auto& id : row) flat.push_back(id.get<int64_t>());
  }
  return torch::tensor(flat, torch::kLong).view({rows, -1});
}

void write_logits(const torch::Tensor& logits, const std::string& path) {
  const torch::Tensor out = logits.to(torch::kFloat).contiguous().cpu();
  std::vector<zerotrain::checkpoint::TensorEntry> entries(1);
  entries[0].name = "logits";
  entries[0].dtype = zerotrain::checkpoint::Dtype::kF32;
  entries[0].shape = out.sizes().vec();
  const std::string header = zerotrain::checkpoint::encode_safetensors_header(entries);
  std::ofstream file(path, std::ios::binary);
  file.write(header.data(), static_cast<std::streamsize>(header.size()));
  file.write(static_cast<const char*>(out.data_ptr()), static_cast<std::streamsize>(out.nbytes()));
  if (!file) throw zerotrain::IoError(path + ": cannot be written");
}

torch::Tensor forward(zm::Model& model, const torch::Tensor& ids) {
  auto lm = std::dynamic_pointer_cast<zerotrain::models::hf::HfCausalLm>(model.module());
  torch::NoGradGuard no_grad;
  return lm->forward(ids);
}

int check_shape(const std::string& dir) {
  const auto counted = zm::shape_of("hf:" + dir, "");
  auto model = zm::make_model("hf:" + dir, "");
  const auto built = zm::shape_of(*model->module(), model->describe());
  const bool same = counted.param_numels == built.param_numels && counted.param_units == built.param_units &&
                    counted.largest_layer_params == built.largest_layer_params;
  std::printf("{\"same\": %s, \"params\": %zu, \"total\": %lld, \"largest_layer_params\": [%lld, %lld], "
              "\"name\": \"%s\"}\n",
              same ? "true" : "false", counted.param_numels.size(), static_cast<long long>(counted.total_params()),
              static_cast<long long>(counted.largest_layer_params), static_cast<long long>(built.largest_layer_params),
              counted.name.c_str());
  return same ? 0 : 1;
}

int zero3(const std::string& dir, const torch::Tensor& ids, const std::string& out, const std::string& dtype,
          bool checkpointing, const std::string& save_dir) {
  const std::string text = std::string(R"({"train_micro_batch_size_per_gpu": 1, "zero_optimization": {"stage": 3},)") +
                           R"("optimizer": {"type": "Adam", "params": {"lr": 0.001}}, "bf16": {"enabled": )" +
                           (dtype == "bf16" ? "true" : "false") + "}}";
  const auto config = zerotrain::Config::from_string(text);
  auto comm = zerotrain::comm::Communicator::init(zerotrain::comm::rendezvous_from_env(),
                                                  zerotrain::comm::options_from_config(config));
  std::unique_ptr<zm::Model> model;
  int64_t delta = 0;
  std::string method;
  {
    PeakRss peak;
    zerotrain::ZeroInit zero_init(config, comm);
    model = zm::make_model("hf:" + dir, "");
    delta = peak.delta_bytes();
    method = peak.method();
  }
  int64_t model_bytes = 0;
  for (const auto& n : zm::shape_of("hf:" + dir, "").param_numels) model_bytes += 4 * n;
  if (checkpointing) model->enable_gradient_checkpointing({});
  auto engine = zerotrain::initialize(model->module(), config, {.comm = comm});
  engine.eval();
  const torch::Tensor logits = forward(*model, ids);
  if (comm.rank() == 0) write_logits(logits, out);
  if (!save_dir.empty()) {
    const auto hf = model->hf_export();
    zerotrain::ModelSaveOptions options;
    options.tensor_name = hf->tensor_name;
    for (const auto& path : hf->files) {
      options.extra_files.emplace_back(path.filename().string(),
                                       zerotrain::files::InputFile(path, {.what = "model folder file"}).read_all());
    }
    options.gather_at_stage3 = true;
    engine.save_16bit_model(save_dir, "model.safetensors", options);
  }
  // One step on the same ids: the loss through Model::loss, a backward through the units.
  torch::Tensor targets = ids.roll(-1, 1);
  targets.select(1, ids.size(1) - 1).fill_(-100);
  engine.train();
  const torch::Tensor loss = model->loss(ids, targets);
  const double before = loss.item<double>();
  engine.backward(loss);
  engine.step();
  engine.eval();
  double after = 0;
  {
    torch::NoGradGuard no_grad;
    after = model->loss(ids, targets).item<double>();
  }
  std::ofstream report(out + ".rank" + std::to_string(comm.rank()) + ".json");
  report.precision(17);
  report << "{\"rank\": " << comm.rank() << ", \"load_peak_delta\": " << delta << ", \"model_bytes\": " << model_bytes
         << ", \"method\": \"" << method << "\", \"loss_before\": " << before << ", \"loss_after\": " << after << "}\n";
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    std::vector<std::string> args(argv + 1, argv + argc);
    if (args.size() == 2 && args[1] == "--check-shape") return check_shape(args[0]);
    if (args.size() < 3) {
      std::fprintf(stderr, "usage: zt_hf_forward DIR IDS.json OUT.safetensors [--dtype fp32|bf16] [--zero3 [--checkpointing] [--save DIR]]\n"
                           "       zt_hf_forward DIR --check-shape\n");
      return 2;
    }
    std::string dtype = "fp32";
    bool zero = false, checkpointing = false;
    std::string save_dir;
    for (size_t i = 3; i < args.size(); ++i) {
      if (args[i] == "--dtype" && i + 1 < args.size()) {
        dtype = args[++i];
      } else if (args[i] == "--zero3") {
        zero = true;
      } else if (args[i] == "--checkpointing") {
        checkpointing = true;
      } else if (args[i] == "--save" && i + 1 < args.size()) {
        save_dir = args[++i];
      } else {
        std::fprintf(stderr, "zt_hf_forward: unknown argument %s\n", args[i].c_str());
        return 2;
      }
    }
    const torch::Tensor ids = read_ids(args[1]);
    if (zero) return zero3(args[0], ids, args[2], dtype, checkpointing, save_dir);
    auto model = zm::make_model("hf:" + args[0], "");
    if (dtype == "bf16") model->module()->to(torch::kBFloat16);
    write_logits(forward(*model, ids), args[2]);
    return 0;
  } catch (const zerotrain::Error& e) {
    std::fprintf(stderr, "zt_hf_forward: %s\n", e.what());
    return e.exit_code();
  } catch (const std::exception& e) {
    std::fprintf(stderr, "zt_hf_forward: %s\n", e.what());
    return 1;
  }
}
