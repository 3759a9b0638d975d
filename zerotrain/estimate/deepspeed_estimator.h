// DeepSpeed's memory estimators, reproduced: estimate_zero2_model_states_mem_needs and
// estimate_zero3_model_states_mem_needs (deepspeed/runtime/zero/stage_1_and_2.py, stage3.py)
// with their printouts, digit for digit. These are DeepSpeed's numbers for a GPU job with
// 16-bit parameters and Adam; docs/estimator.md explains them, and detailed.h has ours.
// No LibTorch.
#pragma once

#include <cstdint>
#include <string>

namespace zerotrain::estimate {

struct Cluster {
  int64_t num_gpus_per_node = 1;
  int64_t num_nodes = 1;
  double additional_buffer_factor = 1.5;
};

struct MemNeeds {
  int64_t cpu_bytes = 0;   // per CPU (host memory of one node)
  int64_t gpu_bytes = 0;   // per GPU
};

// total_params is a count; a double, as DeepSpeed accepts 13e9.
MemNeeds zero2_mem_needs(double total_params, const Cluster& cluster, bool cpu_offload);
MemNeeds zero3_mem_needs(double total_params, double largest_layer_params, const Cluster& cluster, bool cpu_offload,
                         bool cpu_offload_params, bool zero_init);

// What estimate_zero{2,3}_model_states_mem_needs_all_cold print, newline-terminated.
std::string zero2_report(double total_params, const Cluster& cluster);
std::string zero3_report(double total_params, double largest_layer_params, const Cluster& cluster);

}  // namespace zerotrain::estimate
