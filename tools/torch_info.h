// Facts about the LibTorch this binary runs on, kept in one translation unit so the rest
// of the tool compiles without LibTorch headers.
#pragma once

#include <string>

namespace zerotrain::tools {

struct TorchInfo {
  std::string version;          // "2.15.0"
  std::string cpu_capability;   // what ATen dispatches to: "AVX512", "AVX2", "DEFAULT"
  std::string blas;             // "mkl", "open", ...
  int num_threads = 0;          // at::get_num_threads()
  bool gloo = false;            // LibTorch built with Gloo
  bool cuda = false;            // LibTorch built with CUDA (it may still have no GPU to use)
};

TorchInfo torch_info();
// "2.15.0", from the headers this binary was compiled against.
std::string torch_version();

}  // namespace zerotrain::tools
