// Every expression keeps DeepSpeed's order of operations and its int() truncations, so the
// doubles round as Python's do; fmt's fixed-point formatting rounds the binary value
// exactly, as Python's f"{:.2f}" does.
#include "zerotrain/estimate/deepspeed_estimator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "zerotrain/core/error.h"

namespace zerotrain::estimate {
namespace {

// Below 2^53 parameters, 2^20 GPUs and a factor of 1000 every byte count fits an int64
// exactly, as Python's integers would.
void check(double total_params, const Cluster& c) {
  ZT_CHECK(total_params >= 0 && total_params < 9007199254740992.0, UsageError, "the parameter count must be "
           "between 0 and 2^53, got ", total_params);
  ZT_CHECK(c.num_gpus_per_node >= 1 && c.num_nodes >= 1 && c.num_gpus_per_node <= (1 << 20) &&
               c.num_nodes <= (1 << 20) && c.num_gpus_per_node * c.num_nodes <= (1 << 20),
           UsageError, "--num_gpus_per_node and --num_nodes must be at least 1, and 2^20 GPUs in all at most");
  ZT_CHECK(c.additional_buffer_factor > 0 && c.additional_buffer_factor <= 1000, UsageError,
           "--additional_buffer_factor must be positive and at most 1000");
}

int64_t trunc(double v) { return static_cast<int64_t>(v); }   // Python's int() of a float

std::string header(double total_params, const Cluster& c) {
  return fmt::format("Estimated memory needed for params, optim states and gradients for a:\n"
                     "HW: Setup with {} {}, {} {} per node.\n",
                     c.num_nodes, c.num_nodes > 1 ? "nodes" : "node", c.num_gpus_per_node,
                     c.num_gpus_per_node > 1 ? "GPUs" : "GPU") +
         fmt::format("SW: Model with {}M total params", trunc(total_params / 1e6));
}

std::string row(const MemNeeds& m, const std::string& options) {
  const double gib = 1073741824.0;   // DeepSpeed prints GiB as "GB"
  return fmt::format(" {:7.2f}GB | {:6.2f}GB | {}\n", static_cast<double>(m.cpu_bytes) / gib,
                     static_cast<double>(m.gpu_bytes) / gib, options);
}

const char* device(bool offload) { return offload ? "cpu " : "none"; }

}  // namespace

MemNeeds zero2_mem_needs(double total_params, const Cluster& c, bool cpu_offload) {
  check(total_params, c);
  const double total_gpus = static_cast<double>(c.num_nodes * c.num_gpus_per_node);
  const double p = total_params, abf = c.additional_buffer_factor;
  if (cpu_offload) {
    return {trunc(p * std::max(4.0 * total_gpus, 16.0) * abf), trunc(2 * p)};
  }
  // 2: 16-bit params; 18: 16-bit grads 2 + fp32 grads 4 + fp32 params 4 + Adam 8 (sharded).
  return {trunc(p * 4 * static_cast<double>(c.num_gpus_per_node) * abf),
          trunc(2 * p + static_cast<double>(trunc(18 * p / total_gpus)))};
}

MemNeeds zero3_mem_needs(double total_params, double largest_layer_params, const Cluster& c, bool cpu_offload,
                         bool cpu_offload_params, bool zero_init) {
  check(total_params, c);
  ZT_CHECK(largest_layer_params >= 0 && largest_layer_params <= total_params, UsageError,
           "--largest_layer_params must be between 0 and the parameter count");
  const double total_gpus = static_cast<double>(c.num_nodes * c.num_gpus_per_node);
  const double gpus_factor = 1.0 / static_cast<double>(c.num_nodes);
  const double per_node = static_cast<double>(c.num_gpus_per_node);
  const double p = total_params, l = largest_layer_params, abf = c.additional_buffer_factor;
  const double largest_layer_memory = 4 * l;
  double cpu = 0, gpu = 0;
  if (cpu_offload) {
    const double factor = cpu_offload_params ? 18 : 16;
    gpu = cpu_offload_params ? largest_layer_memory
                             : largest_layer_memory + static_cast<double>(trunc(2 * p / total_gpus));
    cpu = zero_init ? p * factor * gpus_factor * abf : p * std::max(4 * per_node, factor * gpus_factor) * abf;
  } else {
    gpu = largest_layer_memory + static_cast<double>(trunc(18 * p / total_gpus));
    cpu = zero_init ? l * 4 * per_node * abf : p * 4 * per_node * abf;
  }
  return {trunc(cpu), trunc(gpu)};
}

std::string zero2_report(double total_params, const Cluster& c) {
  std::string out = header(total_params, c) + ".\n  per CPU  |  per GPU |   Options\n";
  for (bool offload : {true, false}) {
    out += row(zero2_mem_needs(total_params, c, offload), std::string("offload_optimizer=") + device(offload));
  }
  return out;
}

std::string zero3_report(double total_params, double largest_layer_params, const Cluster& c) {
  std::string out = header(total_params, c) +
                    fmt::format(", {}M largest layer params.\n", trunc(largest_layer_params / 1e6)) +
                    "  per CPU  |  per GPU |   Options\n";
  for (bool offload : {true, false}) {
    for (bool offload_params : {true, false}) {
      if (!offload && offload_params) continue;
      for (bool zero_init : {true, false}) {
        out += row(zero3_mem_needs(total_params, largest_layer_params, c, offload, offload_params, zero_init),
                   fmt::format("offload_param={}, offload_optimizer={}, zero_init={}", device(offload_params),
                               device(offload), zero_init ? 1 : 0));
      }
    }
  }
  return out;
}

}  // namespace zerotrain::estimate
