#include "tools/torch_info.h"

#include <ATen/Parallel.h>
#include <ATen/Version.h>
#include <torch/version.h>

namespace zerotrain::tools {
namespace {

// at::show_config() is the one place LibTorch states its build options; pull "KEY=value,"
// or "label: value" entries out of it.
std::string config_entry(const std::string& config, const std::string& key, const std::string& end) {
  auto at = config.find(key);
  if (at == std::string::npos) return "";
  at += key.size();
  return config.substr(at, config.find_first_of(end, at) - at);
}

}  // namespace

std::string torch_version() {
  return std::to_string(TORCH_VERSION_MAJOR) + "." + std::to_string(TORCH_VERSION_MINOR) + "." +
         std::to_string(TORCH_VERSION_PATCH);
}

TorchInfo torch_info() {
  TorchInfo info;
  info.version = torch_version();
  const std::string config = at::show_config();
  info.cpu_capability = config_entry(config, "CPU capability usage: ", "\n");
  info.blas = config_entry(config, "BLAS_INFO=", ",\n");
  info.gloo = config_entry(config, "USE_GLOO=", ",\n") == "ON";
  info.cuda = config_entry(config, "USE_CUDA=", ",\n") == "1" || config_entry(config, "USE_CUDA=", ",\n") == "ON";
  info.num_threads = at::get_num_threads();
  return info;
}

}  // namespace zerotrain::tools
