"""DeepSpeed's ZeRO-3 memory estimator (deepspeed.runtime.zero.stage3), computed and printed
by the C++ estimator, digit for digit."""

from ..._ext import _C


def model_to_params(model):
    """(total, largest layer): parameters counted once; the largest module's own parameters."""
    total = sum({p.data_ptr(): p.numel() for p in model.parameters()}.values())
    largest = max((sum(p.numel() for p in m.parameters(recurse=False)) for m in model.modules()), default=0)
    return total, largest


def estimate_zero3_model_states_mem_needs(total_params, largest_layer_params, num_gpus_per_node=1, num_nodes=1,
                                          cpu_offload=True, cpu_offload_params=True, zero_init=True,
                                          additional_buffer_factor=1.5):
    """(cpu_bytes, gpu_bytes, largest_layer_memory) per CPU and per GPU."""
    cpu, gpu = _C.zero3_mem_needs(float(total_params), float(largest_layer_params), int(num_gpus_per_node),
                                  int(num_nodes), float(additional_buffer_factor), bool(cpu_offload),
                                  bool(cpu_offload_params), bool(zero_init))
    return cpu, gpu, 4 * int(largest_layer_params)


def estimate_zero3_model_states_mem_needs_all_cold(total_params, largest_layer_params, num_gpus_per_node=1,
                                                   num_nodes=1, additional_buffer_factor=1.5):
    print(_C.zero3_report(float(total_params), float(largest_layer_params), int(num_gpus_per_node), int(num_nodes),
                          float(additional_buffer_factor)), end="")


def estimate_zero3_model_states_mem_needs_all_live(model, num_gpus_per_node=1, num_nodes=1,
                                                   additional_buffer_factor=1.5):
    total, largest = model_to_params(model)
    estimate_zero3_model_states_mem_needs_all_cold(total, largest, num_gpus_per_node, num_nodes,
                                                   additional_buffer_factor)
